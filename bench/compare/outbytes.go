// outbytes.go: the gzip body size Go's gziphandler and gzhttp produce for
// the first 2048, 20480 and 102400 bytes of a payload, as their
// BenchmarkGzipHandler_* benchmarks serve them (make bench-compare).
//
// Usage: outbytes PAYLOAD
// Prints one line per handler and size: "NAME SIZE OUT_BYTES".
package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/NYTimes/gziphandler"
	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
)

func outBytes(h http.Handler) (int, error) {
	req := httptest.NewRequest("GET", "/whatever", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("Content-Encoding") != "gzip" {
		return 0, fmt.Errorf("status %d, Content-Encoding %q", rec.Code,
			rec.Header().Get("Content-Encoding"))
	}
	return rec.Body.Len(), nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: outbytes PAYLOAD")
		os.Exit(2)
	}
	bin, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, size := range []int{2048, 20480, 102400} {
		if size > len(bin) {
			fmt.Fprintf(os.Stderr, "payload has %d bytes, fewer than %d\n", len(bin), size)
			os.Exit(1)
		}
		body := bin[:size]
		app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(body)
		})
		// Each benchmark's own handler: gziphandler's default level,
		// gzhttp's at gzip.DefaultCompression, as in their tests.
		kp, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.DefaultCompression))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, c := range []struct {
			name string
			h    http.Handler
		}{{"gziphandler", gziphandler.GzipHandler(app)}, {"gzhttp", kp(app)}} {
			n, err := outBytes(c.h)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s at %d: %v\n", c.name, size, err)
				os.Exit(1)
			}
			fmt.Printf("%s %d %d\n", c.name, size, n)
		}
	}
}
