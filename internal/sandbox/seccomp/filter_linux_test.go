package seccomp

import (
	"encoding/binary"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData encodes struct seccomp_data for the bpf VM, which loads
// words big-endian (the kernel loads them in host order; the words are
// the same).
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		// The filter reads the low word at offset 16+8i (little-endian
		// layout); put it there.
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// program is the filter's instructions.
func program(t testing.TB) []bpf.Instruction {
	t.Helper()
	raw, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("filter does not disassemble")
	}
	return ins
}

func newFilterVM(t testing.TB) *bpf.VM {
	t.Helper()
	vm, err := bpf.NewVM(program(t))
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func runFilter(t testing.TB, vm *bpf.VM, data []byte) uint32 {
	t.Helper()
	v, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

func TestSeccompFilter(t *testing.T) {
	vm := newFilterVM(t)
	eperm := uint32(retErrno | uint32(unix.EPERM))
	cases := []struct {
		name string
		data []byte
		want uint32
	}{
		{"read", seccompData(auditArch, unix.SYS_READ), retAllow},
		{"execve", seccompData(auditArch, unix.SYS_EXECVE), retAllow},
		{"foreign arch", seccompData(auditArch^1, unix.SYS_READ), retKillProcess},
		{"fork-like clone", seccompData(auditArch, unix.SYS_CLONE, uint64(unix.SIGCHLD)), retAllow},
		{"thread clone", seccompData(auditArch, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), retAllow},
		{"clone new user ns", seccompData(auditArch, unix.SYS_CLONE, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), eperm},
		{"clone new mount ns", seccompData(auditArch, unix.SYS_CLONE, unix.CLONE_NEWNS), eperm},
		{"clone3", seccompData(auditArch, unix.SYS_CLONE3), retErrno | uint32(unix.ENOSYS)},
		{"ioctl TIOCSTI", seccompData(auditArch, unix.SYS_IOCTL, 0, unix.TIOCSTI), eperm},
		{"ioctl TIOCSTI high bits", seccompData(auditArch, unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI), eperm},
		{"ioctl TCGETS", seccompData(auditArch, unix.SYS_IOCTL, 0, unix.TCGETS), retAllow},
		{"fchmod 0755", seccompData(auditArch, unix.SYS_FCHMOD, 3, 0o755), retAllow},
		{"fchmod 04755", seccompData(auditArch, unix.SYS_FCHMOD, 3, 0o4755), eperm},
		{"fchmodat 02755", seccompData(auditArch, unix.SYS_FCHMODAT, 3, 0, 0o2755), eperm},
		{"fchmodat 0644", seccompData(auditArch, unix.SYS_FCHMODAT, 3, 0, 0o644), retAllow},
		{"openat create 0644", seccompData(auditArch, unix.SYS_OPENAT, 3, 0, unix.O_CREAT, 0o644), retAllow},
		{"openat create 04755", seccompData(auditArch, unix.SYS_OPENAT, 3, 0, unix.O_CREAT, 0o4755), eperm},
		{"mknodat setgid", seccompData(auditArch, unix.SYS_MKNODAT, 3, 0, unix.S_IFREG|0o2755), eperm},
		{"openat2", seccompData(auditArch, unix.SYS_OPENAT2), retErrno | uint32(unix.ENOSYS)},
	}
	for _, nr := range append(slices.Clone(deniedCommon), deniedArch...) {
		cases = append(cases, struct {
			name string
			data []byte
			want uint32
		}{"denied " + strconv.Itoa(int(nr)), seccompData(auditArch, uint32(nr)), eperm})
	}
	if x32Bit != 0 {
		cases = append(cases, struct {
			name string
			data []byte
			want uint32
		}{"x32 read", seccompData(auditArch, x32Bit|unix.SYS_READ), eperm})
	}
	for _, c := range cases {
		if got := runFilter(t, vm, c.data); got != c.want {
			t.Errorf("%s: got %#x, want %#x", c.name, got, c.want)
		}
	}
}

// FuzzSeccompFilter: whatever a process asks, the filter answers with one
// of its actions, kills foreign architectures and never allows a denied
// call or a namespace-making clone.
func FuzzSeccompFilter(f *testing.F) {
	f.Add(uint32(auditArch), uint32(unix.SYS_READ), uint64(0), uint64(0))
	f.Add(uint32(auditArch), uint32(unix.SYS_CLONE), uint64(unix.CLONE_NEWUSER), uint64(0))
	f.Add(uint32(auditArch), uint32(unix.SYS_IOCTL), uint64(0), uint64(unix.TIOCSTI))
	f.Add(uint32(0), uint32(unix.SYS_PTRACE), uint64(0), uint64(0))
	vm := newFilterVM(f)
	denied := map[uint32]bool{}
	for _, nr := range append(slices.Clone(deniedCommon), deniedArch...) {
		denied[uint32(nr)] = true
	}
	f.Fuzz(func(t *testing.T, arch, nr uint32, a0, a1 uint64) {
		got := runFilter(t, vm, seccompData(arch, nr, a0, a1))
		switch {
		case arch != auditArch:
			if got != retKillProcess {
				t.Fatalf("foreign arch %#x: %#x", arch, got)
			}
			return
		case denied[nr], x32Bit != 0 && nr >= x32Bit, nr == unix.SYS_CLONE && uint32(a0)&nsFlags != 0:
			if got == retAllow {
				t.Fatalf("nr %d args %#x %#x allowed", nr, a0, a1)
			}
		}
		if got != retAllow && got&0xffff0000 != retErrno && got != retKillProcess {
			t.Fatalf("unexpected action %#x", got)
		}
	})
}

// steps counts the instructions the filter runs for data: the kernel
// runs it in full for each call whose arguments it reads (it answers the
// others from its cache), so those calls must meet their checks early.
func steps(t *testing.T, data []byte) int {
	t.Helper()
	ins := program(t)
	var a uint32 // the accumulator
	for pc, n := 0, 1; pc < len(ins); pc, n = pc+1, n+1 {
		switch in := ins[pc].(type) {
		case bpf.LoadAbsolute:
			a = binary.BigEndian.Uint32(data[in.Off:])
		case bpf.RetConstant:
			return n
		case bpf.JumpIf:
			var hit bool
			switch in.Cond {
			case bpf.JumpEqual:
				hit = a == in.Val
			case bpf.JumpNotEqual:
				hit = a != in.Val
			case bpf.JumpGreaterOrEqual:
				hit = a >= in.Val
			case bpf.JumpLessThan:
				hit = a < in.Val
			case bpf.JumpBitsSet:
				hit = a&in.Val != 0
			case bpf.JumpBitsNotSet:
				hit = a&in.Val == 0
			default:
				t.Fatalf("instruction %d: condition %v not modelled", pc, in.Cond)
			}
			if hit {
				pc += int(in.SkipTrue)
			} else {
				pc += int(in.SkipFalse)
			}
		default:
			t.Fatalf("instruction %d: %T not modelled", pc, in)
		}
	}
	t.Fatal("the filter ran off its end")
	return 0
}

// TestSeccompFilterArgumentChecksComeFirst: an openat (the commonest of
// the calls whose arguments the filter reads) runs a handful of
// instructions, not the whole deny list first (it ran 80 when the list
// came first: about 150 ns more per open, measured on this kernel).
func TestSeccompFilterArgumentChecksComeFirst(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
		max  int
	}{
		{"openat", seccompData(auditArch, unix.SYS_OPENAT, 3, 0, unix.O_RDONLY, 0), 10},
		{"clone", seccompData(auditArch, unix.SYS_CLONE, uint64(unix.SIGCHLD)), 30},
		{"ioctl", seccompData(auditArch, unix.SYS_IOCTL, 0, unix.TCGETS), 35},
	} {
		if n := steps(t, c.data); n > c.max {
			t.Errorf("%s: the filter runs %d instructions, want at most %d", c.name, n, c.max)
		}
	}
	// The counter follows the filter: the deny list's last call runs the
	// whole list.
	if n := steps(t, seccompData(auditArch, unix.SYS_OPENAT2)); n < len(deniedCommon) {
		t.Errorf("openat2: %d instructions; the step counter is off", n)
	}
}
