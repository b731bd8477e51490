// kpzstd_test.go: klauspost/compress's zstd encoder behind a handler of
// the shape of gzhttp's BenchmarkGzipHandler_* (make bench-compare): the
// zstd contender, at gzhttp's zstd setting.
//
// The Debian package (klauspost/compress 1.15) has the encoder but not yet
// gzhttp's zstd support, so the wrapper is written here as gzhttp writes
// it: encoders at SpeedFastest, one goroutine each
// (WithEncoderConcurrency(1)), a window of at most 8 MiB (RFC 9659),
// reused through a sync.Pool; Content-Encoding, Vary, no Content-Length.
// Each op is one request through httptest.NewRecorder, as in gzhttp's
// benchmark; out-B/op reports the body's size. The payload is the file
// named by $KPZSTD_PAYLOAD, sliced to 2048/20480/102400 bytes; every body
// is decoded once and compared with it before timing.
package kpzstd

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

var encoders = sync.Pool{New: func() interface{} {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(8<<20))
	if err != nil {
		panic(err)
	}
	return e
}}

func zstdHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "zstd") {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Encoding", "zstd")
		w.Header().Del("Content-Length")
		e := encoders.Get().(*zstd.Encoder)
		e.Reset(w)
		h.ServeHTTP(&zw{w, e}, r)
		e.Close()
		e.Reset(nil)
		encoders.Put(e)
	})
}

type zw struct {
	http.ResponseWriter
	e *zstd.Encoder
}

func (z *zw) Write(p []byte) (int, error) { return z.e.Write(p) }

func benchmark(b *testing.B, parallel bool, size int) {
	bin, err := os.ReadFile(os.Getenv("KPZSTD_PAYLOAD"))
	if err != nil {
		b.Fatal(err)
	}
	if len(bin) < size {
		b.Fatalf("payload has %d bytes, fewer than %d", len(bin), size)
	}
	body := bin[:size]
	handler := zstdHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	req, _ := http.NewRequest("GET", "/whatever", nil)
	req.Header.Set("Accept-Encoding", "zstd")
	res := httptest.NewRecorder()
	handler.ServeHTTP(res, req)
	d, _ := zstd.NewReader(nil)
	plain, err := d.DecodeAll(res.Body.Bytes(), nil)
	if err != nil || !bytes.Equal(plain, body) || res.Header().Get("Content-Encoding") != "zstd" {
		b.Fatalf("the zstd body does not decode to the payload: %v", err)
	}
	outBytes := res.Body.Len()
	b.ReportAllocs()
	b.SetBytes(int64(size))
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				run(b, req, handler)
			}
		})
	} else {
		for i := 0; i < b.N; i++ {
			run(b, req, handler)
		}
	}
	b.ReportMetric(float64(outBytes), "out-B/op")
}

func run(b *testing.B, req *http.Request, handler http.Handler) {
	res := httptest.NewRecorder()
	handler.ServeHTTP(res, req)
	if res.Code != 200 || res.Body.Len() < 200 {
		b.Fatalf("status %d, %d bytes", res.Code, res.Body.Len())
	}
}

func BenchmarkGzipHandler_S2k(b *testing.B)   { benchmark(b, false, 2048) }
func BenchmarkGzipHandler_S20k(b *testing.B)  { benchmark(b, false, 20480) }
func BenchmarkGzipHandler_S100k(b *testing.B) { benchmark(b, false, 102400) }
func BenchmarkGzipHandler_P2k(b *testing.B)   { benchmark(b, true, 2048) }
func BenchmarkGzipHandler_P20k(b *testing.B)  { benchmark(b, true, 20480) }
func BenchmarkGzipHandler_P100k(b *testing.B) { benchmark(b, true, 102400) }
