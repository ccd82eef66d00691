package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpulayer/gpulayer/internal/iostreams"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/topology"
	"github.com/gpulayer/gpulayer/topology/nvmltopo"
)

// fabricReader reads this machine's GPUs' NVLink fabric registrations
// (nvmltopo.LocalFabric), a function so tests can stand in for the driver.
type fabricReader func() ([]topology.GPUFabric, error)

// domain is the machine's multi-node NVLink domain as topology.NVLinkDomain
// judges the registrations: the domain id, or "" with the reason the
// machine is in none; "" and nil where there is no fabric or no NVML (the
// matrix's note already says why NVML was not read). It gives up when ctx
// ends.
func (read fabricReader) domain(ctx context.Context) (string, error) {
	if read == nil {
		return "", nil
	}
	type result struct {
		fabric []topology.GPUFabric
		err    error
	}
	done := make(chan result, 1)
	go func() {
		f, err := read()
		done <- result{f, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		// A wedged driver hangs NVML; the read is left to finish.
		return "", fmt.Errorf("NVML fabric: no answer in time: %w", ctx.Err())
	}
	switch {
	case errors.Is(res.err, nvmltopo.ErrUnavailable):
		return "", nil
	case res.err != nil:
		return "", res.err
	}
	return topology.NVLinkDomain(res.fabric)
}

// fabricLine is the human view's line on the machine's NVLink domain;
// "" when there is nothing to say.
func fabricLine(domain string, err error) string {
	switch {
	case err != nil:
		return "NVLink fabric: " + iostreams.Sanitize(err.Error(), false) + "\n"
	case domain != "":
		return "NVLink domain: " + placement.DomainName(domain) + " (every GPU registered with this multi-node fabric clique)\n"
	}
	return ""
}
