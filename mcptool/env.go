package mcptool

import (
	"os"
	"strings"

	"github.com/toolrun/toolrun/internal/redact"
)

// DefaultEnv lists the environment variables of this process that a
// command's child gets when its Dial leaves the command's Env nil, as
// [Command] does: what a program needs to find its tools, its home, its
// locale, its temporary directory, its certificates and its proxy, on Unix
// and on Windows. The LC_* and XDG_* variables go too. A proxy variable
// whose URL holds a password is left out. Names are compared without
// regard to case.
var DefaultEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM",
	"TMPDIR", "TMP", "TEMP",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
	"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "USERPROFILE", "USERNAME",
	"APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES", "PROGRAMFILES(X86)", "COMMONPROGRAMFILES",
	"NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE",
}

// secretVar reports whether the variable named name is one a child never
// gets unless it is named in [Options.PassEnv] or set in [Options.Env]:
// any ANTHROPIC_* variable, and any whose name says it holds a secret
// (redact.SecretName).
func secretVar(name string) bool {
	return strings.HasPrefix(strings.ToUpper(name), "ANTHROPIC_") || redact.SecretName(name)
}

// defaultVar reports whether the variable name=value is passed by default.
func defaultVar(name, value string) bool {
	upper := strings.ToUpper(name)
	if strings.HasPrefix(upper, "LC_") || strings.HasPrefix(upper, "XDG_") {
		return true
	}
	for _, d := range DefaultEnv {
		if upper == d {
			if strings.HasSuffix(upper, "_PROXY") && upper != "NO_PROXY" {
				// http://user:password@proxy: a credential.
				_, rest, ok := strings.Cut(value, "://")
				host, _, _ := strings.Cut(rest, "/")
				return !ok || !strings.Contains(host, "@")
			}
			return true
		}
	}
	return false
}

// childEnv returns the environment of a command whose Env is explicit
// (nil if it inherits), as [Options.PassEnv] describes. The result is never
// nil, since a nil Env would inherit this process's environment whole.
func childEnv(explicit []string, o *Options) []string {
	env := []string{}
	at := map[string]int{} // name -> index in env
	set := func(name, kv string) {
		if i, ok := at[name]; ok {
			env[i] = kv
			return
		}
		at[name] = len(env)
		env = append(env, kv)
	}
	passed := func(name string) bool {
		for _, p := range o.PassEnv {
			if strings.EqualFold(p, name) {
				return true
			}
		}
		return false
	}
	base := explicit
	if base == nil {
		base = os.Environ()
	}
	for _, kv := range base {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "":
		case passed(name):
			set(name, kv)
		case secretVar(name):
		case explicit != nil || defaultVar(name, value):
			set(name, kv)
		}
	}
	if explicit != nil {
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); passed(name) {
				if _, ok := at[name]; !ok {
					set(name, kv)
				}
			}
		}
	}
	for _, kv := range o.Env {
		name, _, _ := strings.Cut(kv, "=")
		set(name, kv)
	}
	return env
}
