// Command quicgo-peer is an HTTP/0.9 (ALPN "hq-interop") server and client built on
// quic-go, used by mpq's interop suite as an independent QUIC implementation; with
// -http3 both speak HTTP/3 (ALPN "h3", quic-go's http3 package) instead.
//
//	quicgo-peer server -listen 127.0.0.1:4433 -root DIR -cert cert.pem -key key.pem
//	quicgo-peer client -output DIR (-insecure | -ca ca.pem) https://127.0.0.1:4433/name ...
//
// The server prints "listening on HOST:PORT" on stdout once the socket is bound.
// Both roles report 1-RTT key updates on stderr as
// "key_update trigger=local_update|remote_update key_phase=N".
//
// Key updates: quic-go initiates the first key update by itself after 100 packets
// sent or received with the initial 1-RTT keys, then every 100,000 packets
// (internal/handshake.FirstKeyUpdateInterval / keyUpdateInterval). Both knobs are in
// an internal package, with no environment variable or exported setting, so this
// program cannot change them: any transfer of more than ~100 packets with quic-go
// as either endpoint already contains a key update initiated by quic-go.
package main

import (
	"fmt"
	"os"
)

func usage() {
	fmt.Fprintf(os.Stderr, "usage: %s server|client [flags] (-h for flags)\n", os.Args[0])
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = runServer(os.Args[2:])
	case "client":
		err = runClient(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
