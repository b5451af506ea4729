package runner

import (
	"bytes"
	"strings"
	"testing"
)

// TestBodyContentsRaw: file contents travel as raw bytes after the JSON
// (newlines, NULs and invalid UTF-8 included), and come back whole; other
// bodies are plain JSON.
func TestBodyContentsRaw(t *testing.T) {
	data := []byte("line\n\x00\xff\xfe{\"not\":\"json\"}\n")
	b, err := marshalBody(WriteFileRequest{Path: "a\nb", Data: data, Mode: 0o600})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, data) || bytes.Contains(b, []byte(`"data"`)) && !bytes.Contains(b, []byte(`"data":null`)) {
		t.Fatalf("contents not raw: %q", b)
	}
	var w WriteFileRequest
	if err := unmarshalBody(b, &w); err != nil || w.Path != "a\nb" || w.Mode != 0o600 || !bytes.Equal(w.Data, data) {
		t.Fatalf("%v %+v", err, w)
	}
	res := &ReadFileResult{Data: []byte{}, Size: 9, EOF: true}
	if b, err = marshalBody(res); err != nil {
		t.Fatal(err)
	}
	var r ReadFileResult
	if err := unmarshalBody(b, &r); err != nil || r.Size != 9 || !r.EOF || len(r.Data) != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	if res.Data == nil {
		t.Fatal("marshalBody changed its argument")
	}
	// Other bodies are JSON alone.
	if b, err = marshalBody(StatRequest{Path: "x"}); err != nil || strings.Contains(string(b), "\n") {
		t.Fatalf("%q %v", b, err)
	}
}

// BenchmarkBodyWriteFile64KiB: encoding and decoding a 64 KiB write_file.
func BenchmarkBodyWriteFile64KiB(b *testing.B) {
	data := bytes.Repeat([]byte("package main // some source text\n"), 2000)[:64<<10]
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		body, _ := marshalBody(WriteFileRequest{Path: "f.go", Data: data})
		var w WriteFileRequest
		_ = unmarshalBody(body, &w)
	}
}
