package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/jailsh/jail/jail/control"
	"github.com/jailsh/jail/jail/dashboard"
	"github.com/spf13/pflag"
)

// dashboardCmd serves the dashboard on loopback until interrupted. It
// prints the one URL that opens it, and opens a browser only when asked.
func dashboardCmd(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("jail dashboard", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	port := fs.Int("port", 0, "listen on 127.0.0.1:`N` (0: a free port)")
	open := fs.Bool("open", false, "open the page in the desktop's browser")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *port < 0 || *port > 65535 {
		fmt.Fprintf(stderr, "jail: dashboard: bad arguments %q; usage: jail dashboard [--port N] [--open]\n", args)
		return 125
	}
	ln, bound, err := dashboard.Listen(*port)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v; pick another --port\n", err)
		return 125
	}
	srv, err := dashboard.New(control.Dir(), bound)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "jail: %v; try again\n", err)
		return 125
	}
	fmt.Fprintln(stdout, srv.URL())
	if *open {
		openBrowser(srv.URL(), stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "jail: %v; try again\n", err)
		return 1
	}
	return 0
}

// openBrowser hands url to the desktop's opener, without waiting for it.
func openBrowser(url string, stderr io.Writer) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, url)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "jail: dashboard: cannot run %s: %v; open the URL above yourself\n", name, err)
		return
	}
	go cmd.Wait()
}
