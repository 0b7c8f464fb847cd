// Command h2grpc is a gRPC client run inside the jail by the HTTP/2
// tests. Against ADDR (a host:port reached through HTTPS_PROXY) it makes
// a unary call with $KEY as x-api-key metadata, a server-streaming call,
// telling whether its messages came as they were sent, and a unary call
// carrying a 4 MiB message each way; it prints one result a line.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// rawCodec sends messages as they are: the test needs no schema.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "raw" }

func main() {
	if err := run(os.Args[1]); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	conn, err := grpc.NewClient(addr, // resolved by the proxy, not here
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{})),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", os.Getenv("KEY"))

	var header, trailer metadata.MD
	in, out := []byte("ping"), []byte(nil)
	if err := conn.Invoke(ctx, "/jailtest.Echo/Unary", &in, &out, grpc.Header(&header), grpc.Trailer(&trailer)); err != nil {
		return fmt.Errorf("unary: %w", err)
	}
	fmt.Printf("unary=%s seen=%s trailer=%s\n", out, header.Get("seen-key"), trailer.Get("done"))

	desc := &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true}
	st, err := conn.NewStream(ctx, desc, "/jailtest.Echo/Stream")
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if err := st.SendMsg(&in); err != nil {
		return fmt.Errorf("stream send: %w", err)
	}
	st.CloseSend()
	n := 0
	var first, last time.Time
	for {
		var m []byte
		if err := st.RecvMsg(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("stream recv: %w", err)
		}
		if n++; n == 1 {
			first = time.Now()
		}
		last = time.Now()
	}
	// The server sends one message every 300 ms.
	fmt.Printf("stream=%d streamed=%v\n", n, last.Sub(first) >= 900*time.Millisecond)

	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	out = nil
	if err := conn.Invoke(ctx, "/jailtest.Echo/Unary", &big, &out); err != nil {
		return fmt.Errorf("big: %w", err)
	}
	fmt.Printf("big=%d same=%v\n", len(out), string(out) == string(big))
	return nil
}
