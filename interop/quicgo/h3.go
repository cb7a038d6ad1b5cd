package main

// HTTP/3 (RFC 9114, ALPN h3) on quic-go's http3 package: the server and client roles with
// -http3, for mpq's HTTP/3 interop cases.

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"syscall"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// serveHTTP3 serves the files under root over HTTP/3 until SIGINT or SIGTERM.
func serveHTTP3(listen, root string, tlsConf *tls.Config, qconf *quic.Config) error {
	addr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	udp, err := net.ListenUDP("udp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	tlsConf.NextProtos = []string{http3.NextProtoH3}
	srv := &http3.Server{Handler: http.FileServer(http.Dir(root)), TLSConfig: tlsConf, QUICConfig: qconf}
	fmt.Printf("listening on %s\n", udp.LocalAddr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(udp); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// fetchHTTP3 GETs every path from authority at once over one HTTP/3 connection and
// writes each body to outDir; any status other than 200 is an error.
func fetchHTTP3(ctx context.Context, authority string, tlsConf *tls.Config, qconf *quic.Config, paths []string, outDir string) error {
	tlsConf.NextProtos = []string{http3.NextProtoH3}
	tr := &http3.Transport{TLSClientConfig: tlsConf, QUICConfig: qconf}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	errs := make(chan error, len(paths))
	for _, p := range paths {
		go func(p string) { errs <- getHTTP3(ctx, client, authority, p, outDir) }(p)
	}
	for range paths {
		if err := <-errs; err != nil {
			return err
		}
	}
	logf("downloaded %d file(s) over HTTP/3", len(paths))
	return nil
}

func getHTTP3(ctx context.Context, client *http.Client, authority, p, outDir string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+authority+p, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", p, resp.Status)
	}
	f, err := os.Create(filepath.Join(outDir, path.Base(p)))
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return fmt.Errorf("GET %s: %w", p, err)
	}
	return nil
}
