package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
)

const errRequest quic.StreamErrorCode = 0x10

func runServer(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:4433", "UDP address to listen on (port 0: pick one)")
	root := fs.String("root", "", "directory to serve (required)")
	certFile := fs.String("cert", "", "PEM certificate chain (required)")
	keyFile := fs.String("key", "", "PEM private key (required)")
	keyLog := fs.String("keylog", "", "append TLS secrets to this file (default: $SSLKEYLOGFILE)")
	qlogDir := fs.String("qlog-dir", "", "write qlog traces to this directory")
	idle := fs.Duration("idle-timeout", 30*time.Second, "QUIC idle timeout")
	versions := fs.String("versions", "", "QUIC versions, in order, e.g. v2 or v2,v1 (default: quic-go's, v1,v2)")
	retry := fs.Bool("retry", false, "validate every client's address with a Retry first (RFC 9000 §8.1.2)")
	zeroRTT := fs.Bool("0rtt", false, "accept 0-RTT from resumed sessions")
	h3 := fs.Bool("http3", false, "serve HTTP/3 (ALPN h3) instead of HTTP/0.9")
	fs.Parse(args)
	if err := parseVersions(*versions); err != nil {
		return err
	}
	if *root == "" || *certFile == "" || *keyFile == "" {
		return errors.New("server: -root, -cert and -key are required")
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("loading certificate: %w", err)
	}
	kl, err := openKeyLog(*keyLog)
	if err != nil {
		return err
	}
	tlsConf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{alpn},
		KeyLogWriter: kl,
	}
	if *h3 {
		return serveHTTP3(*listen, absRoot, tlsConf, quicConfig(*qlogDir, *idle))
	}
	if *zeroRTT {
		conf := quicConfig(*qlogDir, *idle)
		conf.Allow0RTT = true
		eln, err := quic.ListenAddrEarly(*listen, tlsConf, conf)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		defer eln.Close()
		fmt.Printf("listening on %s\n", eln.Addr())
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		for {
			conn, err := eln.Accept(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			go serveConn(conn, absRoot)
		}
	}
	var ln *quic.Listener
	if *retry {
		addr, err := net.ResolveUDPAddr("udp", *listen)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		udp, err := net.ListenUDP("udp", addr)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		tr := &quic.Transport{Conn: udp, VerifySourceAddress: func(net.Addr) bool { return true }}
		ln, err = tr.Listen(tlsConf, quicConfig(*qlogDir, *idle))
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	} else {
		ln, err = quic.ListenAddr(*listen, tlsConf, quicConfig(*qlogDir, *idle))
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
	}
	defer ln.Close()
	fmt.Printf("listening on %s\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go serveConn(conn, absRoot)
	}
}

func serveConn(conn *quic.Conn, root string) {
	go func() {
		// An early connection (-0rtt) is accepted before its handshake completes.
		<-conn.HandshakeComplete()
		st := conn.ConnectionState()
		logf("%s: handshake completed alpn=%s resumed=%v used_0rtt=%v", conn.RemoteAddr(), st.TLS.NegotiatedProtocol, st.TLS.DidResume, st.Used0RTT)
		logf("%s: negotiated quic_version=%08x", conn.RemoteAddr(), uint32(st.Version))
	}()
	for {
		str, err := conn.AcceptStream(context.Background())
		if err != nil {
			logf("%s: connection ended: %v", conn.RemoteAddr(), err)
			return
		}
		go serveStream(str, root)
	}
}

// readRequest reads up to the first newline or FIN, whichever comes first.
func readRequest(str *quic.Stream) (string, error) {
	var buf []byte
	tmp := make([]byte, 512)
	for len(buf) < 4096 {
		n, err := str.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			return string(buf[:i]), nil
		}
		if err == io.EOF {
			return string(buf), nil
		}
		if err != nil {
			return "", err
		}
	}
	return "", errors.New("request too long")
}

func resolve(root, target string) (string, bool) {
	if i := strings.IndexAny(target, "?#"); i >= 0 {
		target = target[:i]
	}
	if !strings.HasPrefix(target, "/") {
		return "", false
	}
	p := filepath.Join(root, filepath.Clean(target)) // Clean of an absolute path cannot climb above "/"
	if p != root && !strings.HasPrefix(p, root+string(filepath.Separator)) {
		return "", false
	}
	return p, true
}

func serveStream(str *quic.Stream, root string) {
	id := str.StreamID()
	reject := func(why string) {
		logf("stream %d: rejecting request: %s", id, why)
		str.CancelRead(errRequest)
		str.CancelWrite(errRequest)
	}
	line, err := readRequest(str)
	if err != nil {
		reject(err.Error())
		return
	}
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "GET /") {
		reject(fmt.Sprintf("not an HTTP/0.9 GET: %q", line))
		return
	}
	target := strings.Fields(line[4:])[0]
	path, ok := resolve(root, target)
	if !ok {
		reject(fmt.Sprintf("bad path %q", target))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		reject(err.Error())
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		reject(fmt.Sprintf("not a regular file: %q", target))
		return
	}
	n, err := io.Copy(str, f)
	if err != nil {
		logf("stream %d: GET %s failed after %d bytes: %v", id, target, n, err)
		str.CancelWrite(errRequest)
		return
	}
	str.Close()
	logf("stream %d: GET %s -> %d bytes", id, target, n)
}
