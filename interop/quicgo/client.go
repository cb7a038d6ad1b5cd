package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

func runClient(args []string) error {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	output := fs.String("output", "", "directory to write downloads to (required)")
	insecure := fs.Bool("insecure", false, "do not verify the server certificate")
	caFile := fs.String("ca", "", "PEM CA file to verify the server certificate")
	serverName := fs.String("server-name", "", "SNI / name to verify (default: URL host)")
	keyLog := fs.String("keylog", "", "append TLS secrets to this file (default: $SSLKEYLOGFILE)")
	qlogDir := fs.String("qlog-dir", "", "write qlog traces to this directory")
	timeout := fs.Duration("timeout", 60*time.Second, "overall deadline")
	idle := fs.Duration("idle-timeout", 30*time.Second, "QUIC idle timeout")
	versions := fs.String("versions", "", "QUIC versions, in order, e.g. v2 or v2,v1 (default: quic-go's, v1,v2)")
	resume := fs.Bool("resume", false, "fetch the first URL in a first connection, the rest in a second one that resumes its TLS session")
	zeroRTT := fs.Bool("0rtt", false, "like -resume, with the second connection's requests in 0-RTT")
	h3 := fs.Bool("http3", false, "fetch over HTTP/3 (ALPN h3) instead of HTTP/0.9")
	// Go's flag package stops at the first non-flag argument; accept URLs anywhere.
	var urls []string
	for rest := args; ; {
		fs.Parse(rest)
		if fs.NArg() == 0 {
			break
		}
		urls = append(urls, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if err := parseVersions(*versions); err != nil {
		return err
	}
	if *output == "" || len(urls) == 0 {
		return errors.New("client: -output and at least one URL are required")
	}
	if *insecure == (*caFile != "") {
		return errors.New("client: exactly one of -insecure and -ca is required")
	}

	var authority string
	var paths []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return fmt.Errorf("unsupported URL %q", raw)
		}
		port := u.Port()
		if port == "" {
			port = "443"
		}
		a := net.JoinHostPort(u.Hostname(), port)
		if authority != "" && a != authority {
			return errors.New("all URLs must share one host:port")
		}
		authority = a
		p := u.EscapedPath()
		if p == "" {
			p = "/"
		}
		paths = append(paths, p)
	}
	host, _, _ := net.SplitHostPort(authority)

	kl, err := openKeyLog(*keyLog)
	if err != nil {
		return err
	}
	tlsConf := &tls.Config{
		NextProtos:         []string{alpn},
		ServerName:         host,
		InsecureSkipVerify: *insecure,
		KeyLogWriter:       kl,
	}
	if *serverName != "" {
		tlsConf.ServerName = *serverName
	}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("no certificates in %s", *caFile)
		}
		tlsConf.RootCAs = pool
	}
	if err := os.MkdirAll(*output, 0o755); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *h3 {
		return fetchHTTP3(ctx, authority, tlsConf, quicConfig(*qlogDir, *idle), paths, *output)
	}
	if !*resume && !*zeroRTT {
		return fetch(ctx, authority, tlsConf, quicConfig(*qlogDir, *idle), paths, *output, false)
	}
	if len(paths) < 2 {
		return errors.New("client: -resume and -0rtt need at least two URLs")
	}
	tlsConf.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	if err := fetch(ctx, authority, tlsConf, quicConfig(*qlogDir, *idle), paths[:1], *output, false); err != nil {
		return err
	}
	return fetch(ctx, authority, tlsConf, quicConfig(*qlogDir, *idle), paths[1:], *output, *zeroRTT)
}

// fetch downloads paths over one connection; with early, the requests go before the
// handshake completes (0-RTT, if the session ticket allows it).
func fetch(ctx context.Context, authority string, tlsConf *tls.Config, qconf *quic.Config, paths []string, output string, early bool) error {
	start := time.Now()
	var conn *quic.Conn
	var err error
	if early {
		conn, err = quic.DialAddrEarly(ctx, authority, tlsConf, qconf)
	} else {
		conn, err = quic.DialAddr(ctx, authority, tlsConf, qconf)
	}
	if err != nil {
		return fmt.Errorf("dial %s: %w", authority, err)
	}
	logHandshake := func() {
		<-conn.HandshakeComplete()
		st := conn.ConnectionState()
		logf("handshake completed alpn=%s resumed=%v used_0rtt=%v", st.TLS.NegotiatedProtocol, st.TLS.DidResume, st.Used0RTT)
		logf("negotiated quic_version=%08x", uint32(st.Version))
	}
	if !early {
		logHandshake()
	}

	var wg sync.WaitGroup
	errs := make([]error, len(paths))
	sizes := make([]int64, len(paths))
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sizes[i], errs[i] = download(ctx, conn, p, output)
		}()
	}
	wg.Wait()
	if early {
		// The requests went first; the handshake's outcome (0-RTT used?) once it is known.
		logHandshake()
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	if err := errors.Join(errs...); err != nil {
		conn.CloseWithError(0x1, "download failed")
		return err
	}
	logf("downloaded %d file(s), %d bytes in %.2fs", len(paths), total, time.Since(start).Seconds())
	return conn.CloseWithError(0, "")
}

func download(ctx context.Context, conn *quic.Conn, p, outDir string) (int64, error) {
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return 0, err
	}
	if dl, ok := ctx.Deadline(); ok {
		str.SetDeadline(dl)
	}
	if _, err := io.WriteString(str, "GET "+p+"\r\n"); err != nil {
		return 0, err
	}
	str.Close() // FIN on our side of the stream
	name := path.Base(p)
	if name == "/" || name == "." {
		name = "index.html"
	}
	if unescaped, err := url.PathUnescape(name); err == nil {
		name = unescaped
	}
	f, err := os.Create(filepath.Join(outDir, filepath.Base(name)))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := io.Copy(f, str)
	if err != nil {
		return n, fmt.Errorf("GET %s after %s bytes: %w", p, strconv.FormatInt(n, 10), err)
	}
	return n, f.Close()
}
