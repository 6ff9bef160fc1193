package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// The floor pairs measure the transport alone: a bare net/http server on
// loopback that reads each request's body and answers with canned bytes,
// driven by a bare net/http client, the bodies as large as the broker's.
// Nothing of hourglass runs on either side, so the floor is the most any
// broker could do with one HTTP request per message on this machine, and
// the ratio of the broker's send to it says how much of the transport's
// own rate the broker keeps. The pair's baseline is that floor, not the
// engine: run it beside "send" (-only send,httpfloor) to read both.

// floorServer is a bare HTTP server: it reads each request's body and
// answers with answer, as the broker answers a send.
type floorServer struct {
	srv  *http.Server
	ln   net.Listener
	addr string
}

func startFloorServer(answer []byte, h2c bool) (*floorServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if h2c {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	go srv.Serve(ln)
	return &floorServer{srv: srv, ln: ln, addr: ln.Addr().String()}, nil
}

func (f *floorServer) close() { f.srv.Close() }

// floorTransport is a bare client transport with one idle connection per
// caller (HTTP/1.1) or one multiplexed connection (h2c).
func floorTransport(callers int, h2c bool) *http.Transport {
	t := &http.Transport{MaxIdleConns: callers, MaxIdleConnsPerHost: callers, WriteBufferSize: 64 << 10}
	if h2c {
		t.Protocols = new(http.Protocols)
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t
}

// sendSample is one send's request body and the broker's answer to it,
// taken from the broker itself so that the floor moves the same bytes.
func (l *lab) sendSample() (req, answer []byte, err error) {
	topic, err := l.topic("floor")
	if err != nil {
		return nil, nil, err
	}
	body := string(l.body)
	if req, err = json.Marshal(api.SendMessage{Body: &body, Delivery: api.Delivery{Delay: l.c.delay.String()}}); err != nil {
		return nil, nil, err
	}
	ctx, cancel := withTimeout(10 * time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, l.httpURL+"/v1/topics/"+topic+"/messages", bytes.NewReader(req))
	if err != nil {
		return nil, nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("sample send: %s: %s", resp.Status, answer)
	}
	return req, answer, err
}

// httpFloor is c.producers callers posting the sample request to a bare
// server over HTTP/1.1 (h2c false) or HTTP/2 cleartext, one at a time each.
func (l *lab) httpFloor(h2c bool) (float64, error) {
	req, answer, err := l.sendSample()
	if err != nil {
		return 0, err
	}
	fs, err := startFloorServer(answer, h2c)
	if err != nil {
		return 0, err
	}
	defer fs.close()
	tr := floorTransport(l.c.producers, h2c)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	url := "http://" + fs.addr + "/v1/topics/floor/messages"
	return during(l.c.producers, l.c.duration, func(ctx context.Context) (int, error) {
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(req))
		if err != nil {
			return 0, err
		}
		hr.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(hr)
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && (resp.StatusCode != http.StatusOK || n != int64(len(answer))) {
			err = fmt.Errorf("floor: %s, %d bytes", resp.Status, n)
		}
		return 1, err
	})
}
