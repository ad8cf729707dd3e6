package neterr_test

import (
	"bufio"
	"net"
	"testing"
)

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

// listen accepts one connection on 127.0.0.1 and hands it to serve.
func listen(t *testing.T, serve func(net.Conn)) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		serve(c)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln
}

// dialPair connects to a listener whose side of the connection serve gets.
func dialPair(t *testing.T, serve func(net.Conn)) net.Conn {
	ln := listen(t, serve)
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serveRaw answers one HTTP request by hand and returns the URL to ask.
func serveRaw(t *testing.T, serve func(net.Conn)) string {
	return "http://" + listen(t, serve).Addr().String() + "/"
}
