package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

const alpn = "hq-interop"

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// quicVersions is the -versions flag of either role: the QUIC versions to use, in
// order (nil: quic-go's default, v1 then v2). quic-go has no compatible version
// negotiation (RFC 9368): a client starts in the first, a server accepts any of them.
var quicVersions []quic.Version

// parseVersions parses "v1,v2" (also "1", "2" or hex numbers) into quicVersions.
func parseVersions(list string) error {
	quicVersions = nil
	if list == "" {
		return nil
	}
	for _, name := range strings.Split(list, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "v1", "1":
			quicVersions = append(quicVersions, quic.Version1)
		case "v2", "2":
			quicVersions = append(quicVersions, quic.Version2)
		default:
			var v uint32
			if _, err := fmt.Sscanf(name, "0x%x", &v); err != nil {
				return fmt.Errorf("unknown QUIC version %q", name)
			}
			quicVersions = append(quicVersions, quic.Version(v))
		}
	}
	return nil
}

// quicConfig returns the quic-go configuration shared by both roles. qlogDir, if
// set, makes quic-go write one qlog file per connection there.
func quicConfig(qlogDir string, idle time.Duration) *quic.Config {
	return &quic.Config{
		Versions:                       quicVersions,
		MaxIdleTimeout:                 idle,
		InitialStreamReceiveWindow:     4 << 20,
		MaxStreamReceiveWindow:         16 << 20,
		InitialConnectionReceiveWindow: 8 << 20,
		MaxConnectionReceiveWindow:     32 << 20,
		Tracer: func(ctx context.Context, isClient bool, connID quic.ConnectionID) qlogwriter.Trace {
			var inner qlogwriter.Trace
			if qlogDir != "" {
				os.Setenv("QLOGDIR", qlogDir)
				inner = qlog.DefaultConnectionTracer(ctx, isClient, connID)
			}
			return &keyUpdateTrace{inner: inner}
		},
	}
}

func openKeyLog(path string) (io.Writer, error) {
	if path == "" {
		path = os.Getenv("SSLKEYLOGFILE")
	}
	if path == "" {
		return nil, nil
	}
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// keyUpdateTrace is a qlog trace that reports 1-RTT key updates on stderr and
// forwards every event to an optional real qlog trace.
type keyUpdateTrace struct {
	inner qlogwriter.Trace
}

func (t *keyUpdateTrace) AddProducer() qlogwriter.Recorder {
	r := &keyUpdateRecorder{}
	if t.inner != nil {
		r.inner = t.inner.AddProducer()
	}
	return r
}

type keyUpdateRecorder struct {
	mu    sync.Mutex
	inner qlogwriter.Recorder
}

func (r *keyUpdateRecorder) RecordEvent(ev qlogwriter.Event) {
	if ku, ok := ev.(qlog.KeyUpdated); ok && ku.Trigger != qlog.KeyUpdateTLS && ku.KeyType == qlog.KeyTypeClient1RTT {
		// quic-go records one event per direction (client/server 1-RTT key); report once.
		logf("key_update trigger=%s key_phase=%d", ku.Trigger, ku.KeyPhase)
	}
	if r.inner != nil {
		r.mu.Lock()
		r.inner.RecordEvent(ev)
		r.mu.Unlock()
	}
}

func (r *keyUpdateRecorder) Close() error {
	if r.inner != nil {
		return r.inner.Close()
	}
	return nil
}
