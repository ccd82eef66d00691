package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/topology"
	"github.com/gpulayer/gpulayer/topology/nvmltopo"
)

// localMatrix reads this machine's GPU topology through NVML when it can,
// else from `nvidia-smi topo -m`, with a one-line note on note saying why
// NVML was not used. NVML does not see NICs, so its matrix has none.
func localMatrix(ctx context.Context, note io.Writer) (*topology.Matrix, error) {
	return localReader{nvml: nvmltopo.Local, smi: smiMatrix}.read(ctx, note)
}

// localMatrixWithNICs is localMatrix for a caller that ranks GPUs by their
// NICs (pick --multi-node): NVML does not see NICs, so nvidia-smi, which
// does, is asked first and NVML only when nvidia-smi fails.
func localMatrixWithNICs(ctx context.Context, note io.Writer) (*topology.Matrix, error) {
	return localReader{nvml: nvmltopo.Local, smi: smiMatrix, needNICs: true}.read(ctx, note)
}

// localReader is the two ways of reading this machine, as functions so tests
// can stand in for the driver.
type localReader struct {
	nvml func() (*topology.Matrix, error)
	smi  func(ctx context.Context) (*topology.Matrix, error)
	// needNICs puts nvidia-smi first: only its matrix has NIC columns.
	needNICs bool
}

func (r localReader) read(ctx context.Context, note io.Writer) (*topology.Matrix, error) {
	if r.needNICs {
		m, err := r.smi(ctx)
		if err == nil || ctx.Err() != nil {
			return m, err
		}
		m, nerr := r.nvmlWithin(ctx)
		if nerr != nil {
			return nil, err
		}
		fmt.Fprintf(note, "note: %s; read NVML instead, which sees no NICs\n", iostreams.Sanitize(err.Error(), false))
		return m, nil
	}
	m, err := r.nvmlWithin(ctx)
	if err == nil {
		return m, nil
	}
	if ctx.Err() != nil {
		// NVML hung; nvidia-smi asks the same driver, and the time is spent.
		return nil, err
	}
	fmt.Fprintf(note, "note: %s; reading nvidia-smi topo -m instead\n", iostreams.Sanitize(err.Error(), false))
	return r.smi(ctx)
}

// nvmlWithin reads through NVML but gives up when ctx ends: a wedged driver
// can hang NVML as it hangs nvidia-smi. An abandoned read is left to finish
// in the background; the command ends soon after anyway.
func (r localReader) nvmlWithin(ctx context.Context) (*topology.Matrix, error) {
	type result struct {
		m   *topology.Matrix
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := r.nvml()
		done <- result{m, err}
	}()
	select {
	case res := <-done:
		return res.m, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("NVML: no answer in time: %w", ctx.Err())
	}
}

// smiMatrix reads this machine's GPU topology from `nvidia-smi topo -m`.
func smiMatrix(ctx context.Context) (*topology.Matrix, error) {
	text, err := nvidiaSMITopo(ctx)
	if err != nil {
		return nil, err
	}
	m, err := topology.ParseSMI(text)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi topo -m: %w", err)
	}
	return m, nil
}

// smiWaitDelay is how long nvidia-smi's output may stay open after it
// exited or was killed: a process it started can hold the pipe, and
// waiting for that would outlast the command's timeout.
const smiWaitDelay = 2 * time.Second

// nvidiaSMITopo runs `nvidia-smi topo -m` and returns what it printed. The
// context bounds how long it may take: a wedged driver can hang nvidia-smi.
// When the context ends, nvidia-smi's whole process group is killed, and
// its output is given up smiWaitDelay later even if a process that left
// the group still holds it.
func nvidiaSMITopo(ctx context.Context) (string, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "", errors.New("nvidia-smi not found: give a FILE (or - for stdin) with the output of nvidia-smi topo -m, or run on a machine with NVIDIA GPUs")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "topo", "-m")
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	killGroupOnCancel(cmd)
	cmd.WaitDelay = smiWaitDelay
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("nvidia-smi topo -m: no answer in time: %w", ctx.Err())
		}
		if errors.Is(err, exec.ErrWaitDelay) {
			// It exited, but something it started still holds its output.
			killGroup(cmd)
			return "", fmt.Errorf("nvidia-smi topo -m: exited, but a process it started still held its output %s later", smiWaitDelay)
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if msg != "" {
			return "", fmt.Errorf("nvidia-smi topo -m: %w: %s", err, msg)
		}
		return "", fmt.Errorf("nvidia-smi topo -m: %w", err)
	}
	if stdout.Len() > maxTopoInput {
		return "", fmt.Errorf("nvidia-smi topo -m: more than %d bytes of output", maxTopoInput)
	}
	return stdout.String(), nil
}
