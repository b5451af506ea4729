package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmarks compare the same request sent through the gateway (unix
// socket, then TCP loopback to the upstream) and straight to the upstream
// (TCP loopback), interleaved so that both see the same machine load.

func benchUpstream(b *testing.B, h http.HandlerFunc) (*url.URL, *http.Client) {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	return u, &http.Client{Transport: tr}
}

func benchDo(b *testing.B, c *http.Client, url string, hdr http.Header, body string) int64 {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header = hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
	return n
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkGatewayAddedLatency: a small non-streamed chat completion. The
// target is ≤ 0.5 ms added at p50.
func BenchmarkGatewayAddedLatency(b *testing.B) {
	up, direct := benchUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		writeJSON(w, chatJSON)
	})
	tg := startGateway(b, Options{Routes: map[string]Route{RouteOpenAI: {Upstream: up,
		Credential: Credential{Header: "authorization", Value: realOpenAI}}}})
	body := `{"model":"gpt-4o","messages":[{"role":"user","content":"Say hi."}]}`
	viaGW := func() {
		benchDo(b, tg.client, "http://gateway/openai/v1/chat/completions", bearerKey(tg.Placeholder()), body)
	}
	straight := func() { benchDo(b, direct, up.String()+"/v1/chat/completions", bearerKey(realOpenAI), body) }
	for range 20 { // warm the connections
		viaGW()
		straight()
	}
	var gw, dir []time.Duration
	b.ResetTimer()
	for i := range b.N {
		first, second, d1, d2 := viaGW, straight, &gw, &dir
		if i%2 == 1 {
			first, second, d1, d2 = straight, viaGW, &dir, &gw
		}
		t0 := time.Now()
		first()
		t1 := time.Now()
		second()
		t2 := time.Now()
		*d1 = append(*d1, t1.Sub(t0))
		*d2 = append(*d2, t2.Sub(t1))
	}
	b.StopTimer()
	b.ReportMetric(us(percentile(gw, 0.5)-percentile(dir, 0.5)), "us-added-p50")
	b.ReportMetric(us(percentile(gw, 0.9)-percentile(dir, 0.9)), "us-added-p90")
	b.ReportMetric(us(percentile(dir, 0.5)), "us-direct-p50")
	b.ReportMetric(us(percentile(gw, 0.5)), "us-gateway-p50")
	if u := tg.Usage(); u.Requests < int64(b.N) {
		b.Fatalf("%d of %d responses metered", u.Requests, b.N)
	}
}

// BenchmarkGatewayStreamThroughput: one op is 4 KiB of chat completion
// chunks; the stream is b.N of them (8 MiB at -benchtime 2048x), then the
// usage chunk and [DONE]. It is read once straight and once through the
// gateway (which meters every event).
func BenchmarkGatewayStreamThroughput(b *testing.B) {
	var block strings.Builder
	for i := 0; block.Len() < 4096-260; i++ {
		fmt.Fprintf(&block, "data: {\"id\":\"chatcmpl-B9\",\"object\":\"chat.completion.chunk\",\"created\":1731000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_0ba0d124f1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token%04d \"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n", i)
	}
	blk := block.String()
	tail := strings.Join(chatEvents[3:], "")
	up, direct := benchUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/event-stream")
		for range n {
			io.WriteString(w, blk)
		}
		io.WriteString(w, tail)
	})
	tg := startGateway(b, Options{Routes: map[string]Route{RouteOpenAI: {Upstream: up,
		Credential: Credential{Header: "authorization", Value: realOpenAI}}}})
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Write a lot."}]}`
	q := "/v1/chat/completions?n=" + strconv.Itoa(b.N)
	benchDo(b, direct, up.String()+"/v1/chat/completions?n=1", bearerKey(realOpenAI), body)
	benchDo(b, tg.client, "http://gateway/openai/v1/chat/completions?n=1", bearerKey(tg.Placeholder()), body)
	b.ResetTimer()
	t0 := time.Now()
	nd := benchDo(b, direct, up.String()+q, bearerKey(realOpenAI), body)
	t1 := time.Now()
	ng := benchDo(b, tg.client, "http://gateway/openai"+q, bearerKey(tg.Placeholder()), body)
	t2 := time.Now()
	b.StopTimer()
	if nd != ng || nd < int64(b.N*len(blk)) {
		b.Fatalf("read %d straight, %d through the gateway", nd, ng)
	}
	b.ReportMetric(float64(nd)/1e6/t1.Sub(t0).Seconds(), "MB/s-direct")
	b.ReportMetric(float64(ng)/1e6/t2.Sub(t1).Seconds(), "MB/s-gateway")
	if u := tg.waitUsage(b, 2); u.Models[chatModel].PromptTokens != 2*1500 {
		b.Fatalf("the stream's usage was not metered: %+v", u)
	}
}

// responsesStream is an OpenAI Responses event stream as the API sends it:
// response.created and response.completed each echo the whole response,
// with the request's instructions and tools (here 24 kB of them, as a
// coding CLI sends), around a few deltas; only response.completed has
// usage.
func responsesStream() []byte {
	echo := fmt.Sprintf(`"instructions":%q,"tools":[%s]`, strings.Repeat("You are a coding agent. Follow the usage notes. ", 250),
		strings.TrimSuffix(strings.Repeat(`{"type":"function","name":"shell","description":"Runs a command; see its usage.","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}},`, 60), ","))
	var sb strings.Builder
	event := func(typ, data string) { fmt.Fprintf(&sb, "event: %s\ndata: %s\n\n", typ, data) }
	event("response.created", `{"type":"response.created","response":{"id":"resp_1","model":"gpt-5",`+echo+`,"usage":null}}`)
	for range 20 {
		event("response.output_text.delta", `{"type":"response.output_text.delta","delta":"token "}`)
	}
	event("response.completed", `{"type":"response.completed","response":{"id":"resp_1","model":"gpt-5",`+echo+
		`,"usage":{"input_tokens":9000,"input_tokens_details":{"cached_tokens":8000},"output_tokens":120}}}`)
	return []byte(sb.String())
}

// BenchmarkMeterResponsesStream: the CPU the meter spends on one streamed
// Responses answer, read as a reverse proxy reads it (32 kB at a time).
func BenchmarkMeterResponsesStream(b *testing.B) {
	body := responsesStream()
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		mb := &meteredBody{rc: io.NopCloser(strings.NewReader(string(body))), m: &meter{kind: KindResponses}, stream: true, done: func(*meter) {}}
		for {
			if _, err := mb.Read(buf); err != nil {
				break
			}
		}
		if mb.m.in != 9000 || mb.m.model != "gpt-5" {
			b.Fatalf("metered %+v", mb.m)
		}
	}
}
