package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/topology"
	"github.com/gpulayer/gpulayer/topology/nvmltopo"
)

func TestLocalTopologyPrefersNVMLAndFallsBackToNvidiaSmiWithANote(t *testing.T) {
	fromNVML := parseFile(t, "../../testdata/topo/dgx-a100-8x-nv12-8nic-mlx5.txt")
	fromNVML.NICs, fromNVML.NICLinks = nil, nil
	fromSMI := parseFile(t, "../../testdata/topo/4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt")
	unavailable := fmt.Errorf("%w: nvml init: ERROR_LIBRARY_NOT_FOUND", nvmltopo.ErrUnavailable)

	tests := []struct {
		name     string
		nvml     func() (*topology.Matrix, error)
		smi      func(context.Context) (*topology.Matrix, error)
		want     *topology.Matrix
		wantErr  string
		wantNote string // "" for no note
	}{
		{
			name: "NVML answers",
			nvml: func() (*topology.Matrix, error) { return fromNVML, nil },
			smi:  nil, // must not be run
			want: fromNVML,
		},
		{
			name:     "NVML unavailable",
			nvml:     func() (*topology.Matrix, error) { return nil, unavailable },
			smi:      func(context.Context) (*topology.Matrix, error) { return fromSMI, nil },
			want:     fromSMI,
			wantNote: "note: NVML unavailable: nvml init: ERROR_LIBRARY_NOT_FOUND; reading nvidia-smi topo -m instead\n",
		},
		{
			name: "NVML fails after Init",
			nvml: func() (*topology.Matrix, error) {
				return nil, errors.New("nvml: GPU 00000000:07:00.0: NVLink 0 state: GPU is lost")
			},
			smi:      func(context.Context) (*topology.Matrix, error) { return fromSMI, nil },
			want:     fromSMI,
			wantNote: "note: nvml: GPU 00000000:07:00.0: NVLink 0 state: GPU is lost; reading nvidia-smi topo -m instead\n",
		},
		{
			name:     "both fail",
			nvml:     func() (*topology.Matrix, error) { return nil, unavailable },
			smi:      func(context.Context) (*topology.Matrix, error) { return nil, errors.New("nvidia-smi not found") },
			wantErr:  "nvidia-smi not found",
			wantNote: "note: NVML unavailable: nvml init: ERROR_LIBRARY_NOT_FOUND; reading nvidia-smi topo -m instead\n",
		},
		{
			name:     "the note is one sanitized line",
			nvml:     func() (*topology.Matrix, error) { return nil, errors.New("nvml: \x1b[2Jbad\nname") },
			smi:      func(context.Context) (*topology.Matrix, error) { return fromSMI, nil },
			want:     fromSMI,
			wantNote: "note: nvml: \uFFFD[2Jbad\uFFFDname; reading nvidia-smi topo -m instead\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			smi := tt.smi
			if smi == nil {
				smi = func(context.Context) (*topology.Matrix, error) {
					t.Error("nvidia-smi run although NVML answered")
					return nil, errors.New("unexpected")
				}
			}
			var note bytes.Buffer
			got, err := localReader{nvml: tt.nvml, smi: smi}.read(context.Background(), &note)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if got != tt.want {
				t.Errorf("got the matrix of the other source")
			}
			if note.String() != tt.wantNote {
				t.Errorf("note %q, want %q", note.String(), tt.wantNote)
			}
		})
	}
}

func TestLocalTopologyGivesUpOnAHungDriver(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	r := localReader{
		nvml: func() (*topology.Matrix, error) {
			<-release
			return nil, errors.New("released")
		},
		smi: func(context.Context) (*topology.Matrix, error) {
			t.Error("nvidia-smi run after NVML used up the time")
			return nil, errors.New("unexpected")
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var note bytes.Buffer
	_, err := r.read(ctx, &note)
	if err == nil || !strings.Contains(err.Error(), "NVML: no answer in time") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want NVML: no answer in time", err)
	}
	if note.Len() != 0 {
		t.Errorf("note %q after a timeout, want none", note.String())
	}
}

func TestTopoShowWithoutFilePrintsTheFallbackNoteOnStderr(t *testing.T) {
	fromSMI := parseFile(t, "../../testdata/topo/4x-rtx6000ada-pcie-2socket-node-sys-4nic.txt")
	io, _, out, errOut := iostreams.Test()
	opts := &topoShowOptions{
		f:    &factory{IO: io},
		json: true,
		src: topoSource{local: localReader{
			nvml: func() (*topology.Matrix, error) {
				return nil, fmt.Errorf("%w: gpulayer was built without cgo", nvmltopo.ErrUnavailable)
			},
			smi: func(context.Context) (*topology.Matrix, error) { return fromSMI, nil },
		}.read},
	}
	if err := topoShowRun(opts); err != nil {
		t.Fatal(err)
	}
	if got, want := errOut.String(), "note: NVML unavailable: gpulayer was built without cgo; reading nvidia-smi topo -m instead\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if !strings.Contains(out.String(), `"gpus": 4`) {
		t.Errorf("stdout is not the nvidia-smi matrix as JSON:\n%s", out.String())
	}
}

func TestLocalTopologyForMultiNodeAsksNvidiaSMIFirstForItsNICs(t *testing.T) {
	withNICs := parseFile(t, "../../testdata/topo/dgx-a100-8x-nv12-8nic-mlx5.txt")
	noNICs := &topology.Matrix{Links: withNICs.Links}
	nvml := func() (*topology.Matrix, error) { return noNICs, nil }

	var note bytes.Buffer
	got, err := localReader{nvml: nvml, smi: func(context.Context) (*topology.Matrix, error) { return withNICs, nil }, needNICs: true}.read(context.Background(), &note)
	if err != nil || got != withNICs || note.Len() != 0 {
		t.Fatalf("got NICs %d, err %v, note %q: want nvidia-smi's matrix and no note", len(got.NICs), err, note.String())
	}

	note.Reset()
	got, err = localReader{nvml: nvml, smi: func(context.Context) (*topology.Matrix, error) { return nil, errors.New("nvidia-smi not found") }, needNICs: true}.read(context.Background(), &note)
	if err != nil || got != noNICs {
		t.Fatalf("err %v: want NVML's matrix when nvidia-smi fails", err)
	}
	if want := "note: nvidia-smi not found; read NVML instead, which sees no NICs\n"; note.String() != want {
		t.Errorf("note %q, want %q", note.String(), want)
	}

	_, err = localReader{
		nvml:     func() (*topology.Matrix, error) { return nil, errors.New("no driver") },
		smi:      func(context.Context) (*topology.Matrix, error) { return nil, errors.New("nvidia-smi not found") },
		needNICs: true,
	}.read(context.Background(), &note)
	if err == nil || !strings.Contains(err.Error(), "nvidia-smi not found") {
		t.Fatalf("error %v, want nvidia-smi's", err)
	}
}

func TestTopoPickMultiNodeReadsThisMachineWithNICs(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	var got *topoPickOptions
	cmd := newCmdTopoPick(&factory{IO: io}, func(o *topoPickOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--count", "2", "--multi-node"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(got.src.local).Pointer() != reflect.ValueOf(localMatrixWithNICs).Pointer() {
		t.Fatal("pick --multi-node without FILE does not read nvidia-smi first")
	}
}

// TestNvidiaSMIGivesUpWhenItsChildrenHoldTheOutput runs a fake nvidia-smi
// whose children keep its stdout open: hung with a child, hung with a
// child that left its process group, and exited at once with a child left
// behind. Each call must end with an error instead of waiting for the
// children (600 s).
func TestNvidiaSMIGivesUpWhenItsChildrenHoldTheOutput(t *testing.T) {
	cases := []struct {
		name, script string
		timeout      time.Duration
		says         string
		wantDeadline bool
	}{
		{"hung with a child", "/bin/sleep 600 &\necho $! >\"$PIDS\"\nexec /bin/sleep 600\n", 300 * time.Millisecond, "no answer in time", true},
		{"hung with a child out of its group", "/usr/bin/setsid /bin/sleep 600 &\necho $! >\"$PIDS\"\nexec /bin/sleep 600\n", 300 * time.Millisecond, "no answer in time", true},
		{"exited with a child left behind", "/bin/sleep 600 &\necho $! >\"$PIDS\"\necho GPU0\nexit 0\n", 15 * time.Second, "a process it started still held its output", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pids := filepath.Join(t.TempDir(), "pids")
			t.Setenv("PIDS", pids)
			fakeNvidiaSMI(t, c.script)
			t.Cleanup(func() { stopChildren(t, pids) })

			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			type result struct {
				out string
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := nvidiaSMITopo(ctx)
				done <- result{out, err}
			}()
			select {
			case r := <-done:
				if r.err == nil || !strings.Contains(r.err.Error(), c.says) || errors.Is(r.err, context.DeadlineExceeded) != c.wantDeadline {
					t.Fatalf("output %q, error %v: want one saying %q", r.out, r.err, c.says)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("nvidiaSMITopo still waits for the output its children hold")
			}
		})
	}
}

// stopChildren kills the processes whose ids the fake nvidia-smi wrote to
// path, so that no sleep outlives the test.
func stopChildren(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}
