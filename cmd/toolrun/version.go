package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

var versionCommand = &command{
	name:    "version",
	args:    "",
	summary: "print the version of toolrun, the Go it was built with, and its revision",
	doc: `Version prints the module version of toolrun ("(devel)" for a build from a
checkout), the Go version it was built with, and the version control
revision it was built from, when the build recorded one.`,
	exits: []exitStatus{
		{exitOK, "ok", "the version was printed"},
		usageStatus,
	},
	setup: func(fs *flag.FlagSet) func(context.Context, *cli, []string) int {
		return func(ctx context.Context, c *cli, args []string) int {
			if len(args) > 0 {
				return c.usageError("version", "unexpected arguments: %s", strings.Join(args, " "))
			}
			info, _ := debug.ReadBuildInfo()
			printVersion(c.stdout, info)
			return exitOK
		}
	},
}

// printVersion prints what info says of the build: "toolrun v0.1.0 go1.26.8
// linux/amd64", then the revision and its time if the build recorded them.
func printVersion(w io.Writer, info *debug.BuildInfo) {
	version, goVersion := "unknown", "unknown"
	settings := map[string]string{}
	if info != nil {
		version, goVersion = info.Main.Version, info.GoVersion
		if version == "" {
			version = "unknown"
		}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	platform := settings["GOOS"] + "/" + settings["GOARCH"]
	if platform == "/" {
		platform = ""
	}
	fmt.Fprintln(w, strings.TrimSpace(fmt.Sprintf("toolrun %s %s %s", version, goVersion, platform)))
	if rev := settings["vcs.revision"]; rev != "" {
		line := "revision " + rev
		if t := settings["vcs.time"]; t != "" {
			line += " (" + t + ")"
		}
		if settings["vcs.modified"] == "true" {
			line += ", with uncommitted changes"
		}
		fmt.Fprintln(w, line)
	}
}
