// Command temporaldev runs the Temporal dev server that toolrun's CI tests
// the temporal module against: Temporal server v1.32, in memory (SQLite),
// with the namespace "default" and those it is asked for, no UI, on the
// given address, until SIGINT or SIGTERM.
//
// It exists because the Temporal CLI that embeds server v1.32 (CLI v1.9)
// cannot be built with `go install` (its go.mod replaces a module with a
// directory its module zip leaves out), and the CLI that can (v1.5)
// embeds server v1.29, which does not end a stopping worker's polls: an
// idle toolrun worker, which lets its polls under way end rather than drop
// what they bring, then waits out the server's long poll before it exits.
// Server v1.32 ends them at once when the dynamic config
// frontend.enableCancelWorkerPollsOnShutdown is on, and the tests of that
// need it. A team's own dev server is the CLI's `temporal server
// start-dev` of a release that embeds server 1.32 or later, given
// `--dynamic-config-value frontend.enableCancelWorkerPollsOnShutdown=true`.
//
// The server is started the way the CLI's `server start-dev` starts it
// (github.com/temporalio/cli, internal/devserver, MIT licence, Copyright
// (c) 2022 Temporal Technologies Inc.), with the same default dynamic
// config. A dynamic config value may be one namespace's (NAMESPACE:KEY),
// which the CLI's flag cannot say: CI runs one namespace where the server
// ends a stopping worker's polls and one where it does not. The program
// prints "ready" on standard output once the frontend answers gRPC health
// checks, so a script can wait for it.
//
// Usage:
//
//	temporaldev -port 7233 -namespace polls-kept \
//	  -dynamic-config-value 'frontend.enableCancelWorkerPollsOnShutdown=true' \
//	  -dynamic-config-value 'polls-kept:frontend.enableCancelWorkerPollsOnShutdown=false' \
//	  -search-attribute ToolrunStatus=Keyword
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const clusterName = "active"

// multiFlag is a flag that may be given more than once.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "temporaldev:", err)
		os.Exit(1)
	}
}

func run() error {
	ip := flag.String("ip", "127.0.0.1", "the IP address the frontend listens on")
	port := flag.Int("port", 7233, "the frontend's gRPC port")
	logLevel := flag.String("log-level", "warn", "the server's log level: debug, info, warn, error")
	var namespaces, dyn, attrs multiFlag
	flag.Var(&namespaces, "namespace", "a namespace to create besides \"default\" (repeatable)")
	flag.Var(&dyn, "dynamic-config-value", "[NAMESPACE:]KEY=JSON, a dynamic config value, for one namespace if it names one (repeatable)")
	flag.Var(&attrs, "search-attribute", "NAME=TYPE, a search attribute to register (repeatable): Keyword, Text, Int, Double, Bool, Datetime, KeywordList")
	flag.Parse()

	values, err := dynamicValues(dyn)
	if err != nil {
		return err
	}
	searchAttrs := map[string]enums.IndexedValueType{}
	for _, a := range attrs {
		name, typ, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("search attribute %q: want NAME=TYPE", a)
		}
		v, ok := enums.IndexedValueType_shorthandValue[typ]
		if !ok {
			return fmt.Errorf("search attribute %q: unknown type %q", a, typ)
		}
		searchAttrs[name] = enums.IndexedValueType(v)
	}

	conf, err := serverConfig(*ip, *port, append([]string{"default"}, namespaces...), searchAttrs)
	if err != nil {
		return err
	}
	logger := log.NewZapLogger(log.BuildZapLogger(log.Config{Level: *logLevel, Format: "console"}))
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return err
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return err
	}
	// The services find each other on loopback, whatever ip the frontend
	// is given, as in the CLI's dev server.
	hosts := map[primitives.ServiceName]static.Hosts{}
	for name, svc := range map[primitives.ServiceName]string{
		primitives.FrontendService: "frontend", primitives.MatchingService: "matching",
		primitives.HistoryService: "history", primitives.WorkerService: "worker",
	} {
		hosts[name] = static.SingleLocalHost(net.JoinHostPort("127.0.0.1", strconv.Itoa(conf.Services[svc].RPC.GRPCPort)))
	}
	server, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(values),
	)
	if err != nil {
		return err
	}
	if err := server.Start(); err != nil {
		return fmt.Errorf("starting the server: %w", err)
	}
	defer server.Stop()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := waitHealthy(ctx, net.JoinHostPort(*ip, strconv.Itoa(*port))); err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	return nil
}

// cliDefaults is the dynamic config the CLI's dev server sets unless told
// otherwise: a bigger history cache and visibility rate, and search
// attributes and Nexus endpoints visible as soon as they are created.
var cliDefaults = map[string]any{
	"history.hostLevelCacheMaxSize":                  8096,
	"frontend.namespaceRPS.visibility":               100,
	"system.forceSearchAttributesCacheRefreshOnRead": true,
	"system.forceNexusEndpointRefreshOnRead":         true,
	"frontend.persistenceMaxQPS":                     10000,
	"history.persistenceMaxQPS":                      45000,
}

// dynamicValues is the CLI's default dynamic config with the flags' values
// over it. A flag's key may be preceded by a namespace and a colon, which
// makes the value that namespace's (the server prefers it to a value for
// every namespace, for the settings it reads by namespace). A JSON number
// that is an integer becomes an int, the type the server's integer
// settings read.
func dynamicValues(flags []string) (dynamicconfig.StaticClient, error) {
	values := map[dynamicconfig.Key][]dynamicconfig.ConstrainedValue{}
	set := func(key string, c dynamicconfig.Constraints, v any) {
		k := dynamicconfig.MakeKey(key)
		values[k] = slices.DeleteFunc(values[k], func(cv dynamicconfig.ConstrainedValue) bool { return cv.Constraints == c })
		values[k] = append(values[k], dynamicconfig.ConstrainedValue{Constraints: c, Value: v})
	}
	for k, v := range cliDefaults {
		set(k, dynamicconfig.Constraints{}, v)
	}
	for _, f := range flags {
		k, raw, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("dynamic config value %q: want [NAMESPACE:]KEY=JSON", f)
		}
		var c dynamicconfig.Constraints
		if ns, key, ok := strings.Cut(k, ":"); ok {
			c.Namespace, k = ns, key
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("dynamic config value %q: %w", f, err)
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				v = int(i)
			} else if x, err := n.Float64(); err == nil {
				v = x
			}
		}
		set(k, c, v)
	}
	client := dynamicconfig.StaticClient{}
	for k, cvs := range values {
		client[k] = cvs
	}
	return client, nil
}

// serverConfig is the dev server's configuration: one history shard, an
// in-memory SQLite database with the namespaces in it, every service on
// ip, the frontend on port and the others on free ports.
func serverConfig(ip string, port int, namespaces []string, searchAttrs map[string]enums.IndexedValueType) (*config.Config, error) {
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = ip

	sqlConf := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		ConnectAttributes: map[string]string{"mode": "memory", "cache": "shared"},
		DatabaseName:      strconv.Itoa(rand.IntN(9999999)),
	}
	var nsConfs []*sqliteschema.NamespaceConfig
	for _, name := range namespaces {
		ns, err := sqliteschema.NewNamespaceConfig(clusterName, name, false, searchAttrs)
		if err != nil {
			return nil, fmt.Errorf("namespace %q: %w", name, err)
		}
		nsConfs = append(nsConfs, ns)
	}
	if err := sqliteschema.CreateNamespaces(sqlConf, nsConfs...); err != nil {
		return nil, fmt.Errorf("creating the namespaces: %w", err)
	}
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sqlConf}}

	httpPort, err := freePort(ip)
	if err != nil {
		return nil, err
	}
	frontend := net.JoinHostPort(ip, strconv.Itoa(port))
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontend,
				HTTPAddress:            net.JoinHostPort(ip, strconv.Itoa(httpPort)),
				ClusterID:              uuid.NewString(),
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for _, name := range []string{"frontend", "history", "matching", "worker"} {
		var svc config.Service
		svc.RPC.BindOnIP = ip
		if name == "frontend" {
			svc.RPC.GRPCPort, svc.RPC.HTTPPort = port, httpPort
		} else if svc.RPC.GRPCPort, err = freePort(ip); err != nil {
			return nil, err
		}
		conf.Services[name] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontend
	return &conf, nil
}

// freePort is a TCP port free on ip now. The listener is closed after a
// connection to it, closed from the listening side, so the port sits in
// TIME_WAIT and the kernel does not hand it to another bind(:0) soon
// (the CLI's technique), while an explicit bind still takes it.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("a free port: %w", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("a free port: %w", err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("a free port: %w", err)
	}
	s.Close()
	return port, nil
}

// waitHealthy returns once the frontend at addr answers a gRPC health check
// for the workflow service with SERVING, or after a minute with an error.
func waitHealthy(ctx context.Context, addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	for {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "temporal.api.workflowservice.v1.WorkflowService"})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the frontend at %s is not serving after a minute (last: %v)", addr, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
