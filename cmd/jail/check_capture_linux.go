package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/jailsh/jail/jail/linux"
	"github.com/jailsh/jail/jail/linux/inside"
)

// probeCaptureArg makes `jail check` the child that probeCapture runs in.
const probeCaptureArg = "--probe-capture"

// runCaptureProbe starts probeCapture in namespaces like a jail's (a user
// namespace nested under the one owning the network, with the
// capabilities init is left) and returns nil when the capture worked.
func runCaptureProbe() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the jail binary: %w", err)
	}
	bwrap, err := linux.FindBwrap()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bwrap, "--unshare-user", "--unshare-net", "--unshare-pid", "--disable-userns",
		"--cap-drop", "ALL", "--cap-add", "CAP_NET_ADMIN", "--cap-add", "CAP_SYS_ADMIN",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", exe, "check", probeCaptureArg).CombinedOutput()
	if line := strings.TrimSpace(string(out)); line != "capture ok" {
		if line == "" && err != nil {
			line = err.Error()
		}
		return fmt.Errorf("%s", line)
	}
	return nil
}

// probeCapture is the probe child: it programs the capture as init does
// and checks that a connection to an address outside the namespace
// arrives at the capture port with its original destination.
func probeCapture(w io.Writer) int {
	runtime.LockOSThread()
	err := captureRoundTrip()
	if err != nil {
		fmt.Fprintln(w, err)
		return 1
	}
	fmt.Fprintln(w, "capture ok")
	return 0
}

func captureRoundTrip() error {
	if err := inside.ProgramCapture(linux.CapturePort); err != nil {
		return err
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", linux.CapturePort))
	if err != nil {
		return err
	}
	defer l.Close()
	const dst = "192.0.2.1:443"
	c, err := net.DialTimeout("tcp", dst, 2*time.Second)
	if err != nil {
		return fmt.Errorf("capture: dialling %s: %w", dst, err)
	}
	defer c.Close()
	in, err := l.Accept()
	if err != nil {
		return err
	}
	defer in.Close()
	got, err := inside.OriginalDst(in.(*net.TCPConn))
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if got.String() != dst {
		return fmt.Errorf("capture: original destination %s, want %s", got, dst)
	}
	return nil
}

// addCapture adds the transparent capture's row.
func addCapture(add func(ok, required bool, name, detail string)) {
	if err := runCaptureProbe(); err != nil {
		fix := "a kernel with nftables NAT (CONFIG_NF_TABLES, CONFIG_NFT_REDIR, CONFIG_NF_CONNTRACK)"
		if strings.Contains(err.Error(), "built with cgo") {
			fix = "build jail with CGO_ENABLED=0 (make build does)"
		}
		add(false, false, "capture", fmt.Sprintf("%v; only programs that honour HTTP_PROXY reach the network; fix: %s", err, fix))
		return
	}
	add(true, false, "capture", "every TCP connection reaches the proxy, proxy variables or not")
}
