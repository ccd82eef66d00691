package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/gpulayer/gpulayer/topology"
)

// localMatrix reads this machine's GPU topology from `nvidia-smi topo -m`.
func localMatrix(ctx context.Context) (*topology.Matrix, error) {
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

// nvidiaSMITopo runs `nvidia-smi topo -m` and returns what it printed. The
// context bounds how long it may take: a wedged driver can hang nvidia-smi.
func nvidiaSMITopo(ctx context.Context) (string, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return "", errors.New("nvidia-smi not found: give a FILE (or - for stdin) with the output of nvidia-smi topo -m, or run on a machine with NVIDIA GPUs")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "topo", "-m")
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("nvidia-smi topo -m: no answer in time: %w", ctx.Err())
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
