package users

import (
	"errors"
	"testing"
	"time"
)

func n(v int64) *int64 { return &v }

func TestTokenForm(t *testing.T) {
	s := NewSecret()
	if len(s) != tokenLen || !LooksLikeToken(s) || Hint(s) != s[:10] {
		t.Fatalf("token %q", s)
	}
	for _, bad := range []string{"", "agr_", s[:len(s)-1], s[:len(s)-1] + "q", "xyz_" + s[4:]} {
		if LooksLikeToken(bad) && bad != s {
			t.Errorf("%q looks like a token", bad)
		}
	}
	if Hash(s) == Hash(NewSecret()) || len(Hash(s)) != 64 {
		t.Error("hash")
	}
}

func TestOverAndDecide(t *testing.T) {
	l := Limits{ConcurrentRuns: n(2), TokensPerDay: n(1000)}.Over(Limits{ConcurrentRuns: n(0), MaxTokens: n(300)})
	if I(l.ConcurrentRuns) != 0 || I(l.TokensPerDay) != 1000 || I(l.MaxTokens) != 300 {
		t.Fatalf("over: %+v", l)
	}
	p := PeriodsAt(time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC))
	if !p.NextDay.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) || !p.NextMonth.Equal(p.NextDay) {
		t.Fatalf("periods %+v", p)
	}
	a, err := Decide(Usage{TokensToday: 800}, l, p, true)
	if err != nil || a.MaxTokens != 200 {
		t.Fatalf("budget: %+v %v", a, err)
	}
	_, err = Decide(Usage{TokensToday: 1000}, l, p, true)
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Limit != "tokens_per_day" || !ex.Resets.Equal(p.NextDay) {
		t.Fatalf("over the day: %v", err)
	}
	if _, err := Decide(Usage{RunsToday: 5}, Limits{RunsPerDay: n(5)}, p, false); err != nil {
		t.Fatalf("a resume is not a run of the day: %v", err)
	}
}
