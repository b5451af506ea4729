package run

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count: a whole number with an optional binary
// suffix K, M, G or T (also KiB, KB, k, ...: all powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "B"), "I")
	mult := int64(1)
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			u = u[:n-1]
		}
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 || (mult > 1 && n > (1<<62)/mult) {
		return 0, fmt.Errorf("%q is not a size (like 10G, 512M or a number of bytes)", s)
	}
	return n * mult, nil
}

// FormatSize renders a byte count for people: 512 B, 3.4 KiB, 12 MiB.
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), []string{"KiB", "MiB", "GiB", "TiB"}
	i := -1
	for v >= unit && i < len(suffix)-1 {
		v /= unit
		i++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, suffix[i])
	}
	return fmt.Sprintf("%.0f %s", v, suffix[i])
}
