package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// selfCommand returns how to run this toolrun again from a shell, for the
// commands it tells the person to run next ("see it with: … view",
// "continue it with: … resume"), so that what it prints works as printed:
//
//   - "toolrun" when that name on the PATH is this program, or when the
//     program is not named toolrun (a test binary, a copy under another
//     name), where no better guess is at hand;
//   - "go run ./cmd/toolrun" for a program built by "go run" in a clone,
//     as the README's set-up leaves a newcomer (the package path if the
//     working directory is not the clone's root);
//   - else the program's path, quoted for a shell.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "toolrun"
	}
	if base := strings.TrimSuffix(filepath.Base(exe), ".exe"); base != "toolrun" {
		return "toolrun"
	}
	if found, err := exec.LookPath("toolrun"); err == nil && sameFile(found, exe) {
		return "toolrun"
	}
	if strings.Contains(filepath.ToSlash(exe), "/go-build") {
		if _, err := os.Stat(filepath.Join("cmd", "toolrun", "main.go")); err == nil {
			return "go run ./cmd/toolrun"
		}
		return "go run github.com/toolrun/toolrun/cmd/toolrun"
	}
	return shellQuote(exe)
}

// sameFile reports whether the paths a and b name one file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
