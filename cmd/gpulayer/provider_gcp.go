package main

import (
	"context"

	"github.com/gpulayer/gpulayer/providers"
	"github.com/gpulayer/gpulayer/providers/gcp"
)

// openProvider opens the provider of fleets of created machines. It
// connects lazily: a configuration whose fleets need no API call needs no
// credentials.
var openProvider = func(ctx context.Context) (providers.Provider, error) {
	return gcp.New(ctx, gcp.Options{})
}
