package main

import (
	"context"
	"fmt"
	"html"
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
		page, err := openBrowser(srv.URL(), stderr)
		if err == nil {
			defer os.Remove(page)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "jail: %v; try again\n", err)
		return 1
	}
	return 0
}

// openBrowser hands the desktop's opener a page of the user's own (mode
// 0600) that sends the browser on to url, without waiting for it: the
// token in url never appears on a command line, which every local user
// may read. It returns the page's path, removed by the caller.
func openBrowser(url string, stderr io.Writer) (string, error) {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	page, err := redirectPage(url)
	if err != nil {
		fmt.Fprintf(stderr, "jail: dashboard: cannot write the page to open: %v; open the URL above yourself\n", err)
		return "", err
	}
	cmd := exec.Command(name, page)
	if err := cmd.Start(); err != nil {
		os.Remove(page)
		fmt.Fprintf(stderr, "jail: dashboard: cannot run %s: %v; open the URL above yourself\n", name, err)
		return "", err
	}
	go cmd.Wait()
	return page, nil
}

// redirectPage writes a page that sends the browser on to url into a new
// file only this user may read, and returns its path.
func redirectPage(url string) (string, error) {
	f, err := os.CreateTemp("", "jail-dashboard-*.html")
	if err != nil {
		return "", err
	}
	u := html.EscapeString(url)
	_, err = fmt.Fprintf(f, "<!DOCTYPE html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0;url=%s\">\n<title>jail dashboard</title>\n<a href=\"%s\">jail dashboard</a>\n", u, u)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
