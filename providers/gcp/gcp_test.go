package gcp_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/providers"
	"github.com/gpulayer/gpulayer/providers/gcp"
	"github.com/gpulayer/gpulayer/providers/gcp/gcptest"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

const (
	project = "my-project"
	zone    = "us-central1-a"
	lineage = "3f0c8a52-9d1e-4c7b-8a0e-5b2f1d6c9e11"
)

// fleetAt is a spot fleet of A100 machines whose API is url.
func fleetAt(url string) *config.Fleet {
	return &config.Fleet{
		Name:  "trainers",
		Count: 2,
		GCP: &config.GCP{
			Project:          project,
			Zone:             zone,
			MachineType:      "a2-highgpu-1g",
			Image:            "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu",
			AcceleratorType:  "nvidia-tesla-a100",
			AcceleratorCount: 1,
			DiskSizeGB:       200,
			Spot:             true,
			ServiceAccount:   "runner@my-project.iam.gserviceaccount.com",
			Tags:             []string{"gpulayer-ssh"},
			Metadata:         map[string]string{"startup-script": "nvidia-smi"},
			Labels:           map[string]string{"team": "ml"},
			Endpoint:         url,
		},
	}
}

func newProvider(t *testing.T, opts gcp.Options) *gcp.Provider {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 10 * time.Millisecond
	}
	p, err := gcp.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// bounded is a context no test outlives: a provider that stops waiting
// correctly never comes near it.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCreateSendsLabelsMetadataAcceleratorsAndSpotScheduling(t *testing.T) {
	srv := gcptest.Start(t)
	srv.Addresses = func(i int, name string) (string, string) {
		return fmt.Sprintf("10.128.0.%d", 10+i), fmt.Sprintf("35.1.2.%d", 10+i)
	}
	srv.HostKeys = func(i int, name string) []gcptest.KeyValue {
		return []gcptest.KeyValue{
			{Key: "ssh-rsa", Value: "AAAAB3NzaC1yc2EAAAADAQABAAABAQ=="},
			{Key: "ssh-ed25519", Value: "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"},
			// From the machine, untrusted: an escape sequence is no key type.
			{Key: "ssh-ed25519\x1b[2J", Value: "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"},
		}
	}
	p := newProvider(t, gcp.Options{})
	fleet := fleetAt(srv.URL)

	m, err := p.Create(bounded(t), fleet, "trainers-0", lineage)
	if err != nil {
		t.Fatal(err)
	}

	insts := srv.Instances()
	if len(insts) != 1 {
		t.Fatalf("instances = %d, want 1", len(insts))
	}
	got := insts[0]
	wantLabels := map[string]string{"team": "ml", config.GCPLabelFleet: "trainers", config.GCPLabelLineage: lineage}
	if !reflect.DeepEqual(got.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", got.Labels, wantLabels)
	}
	wantMeta := map[string]string{"startup-script": "nvidia-smi", "enable-guest-attributes": "TRUE"}
	if !reflect.DeepEqual(got.Metadata, wantMeta) {
		t.Errorf("metadata = %v, want %v", got.Metadata, wantMeta)
	}
	if want := "zones/us-central1-a/machineTypes/a2-highgpu-1g"; got.MachineType != want {
		t.Errorf("machineType = %q, want %q", got.MachineType, want)
	}
	wantAcc := []gcptest.Accelerator{{Type: "zones/us-central1-a/acceleratorTypes/nvidia-tesla-a100", Count: 1}}
	if !reflect.DeepEqual(got.Accelerators, wantAcc) {
		t.Errorf("accelerators = %v, want %v", got.Accelerators, wantAcc)
	}
	wantSched := gcptest.Scheduling{OnHostMaintenance: "TERMINATE", ProvisioningModel: "SPOT", InstanceTerminationAction: "STOP"}
	if got.Scheduling != wantSched {
		t.Errorf("scheduling = %+v, want %+v", got.Scheduling, wantSched)
	}
	res := got.Resource
	disk := res.GetDisks()[0]
	if !disk.GetBoot() || !disk.GetAutoDelete() || disk.GetInitializeParams().GetSourceImage() != fleet.GCP.Image || disk.GetInitializeParams().GetDiskSizeGb() != 200 {
		t.Errorf("boot disk = %v, want an auto-deleted boot disk of 200 GB from %s", disk, fleet.GCP.Image)
	}
	if sa := res.GetServiceAccounts(); len(sa) != 1 || sa[0].GetEmail() != fleet.GCP.ServiceAccount || !reflect.DeepEqual(sa[0].GetScopes(), []string{"https://www.googleapis.com/auth/cloud-platform"}) {
		t.Errorf("service accounts = %v", sa)
	}
	if tags := res.GetTags().GetItems(); !reflect.DeepEqual(tags, []string{"gpulayer-ssh"}) {
		t.Errorf("tags = %v", tags)
	}
	if ac := res.GetNetworkInterfaces()[0].GetAccessConfigs(); len(ac) != 1 || ac[0].GetType() != "ONE_TO_ONE_NAT" {
		t.Errorf("access configs = %v, want one ONE_TO_ONE_NAT", ac)
	}
	if len(res.GetResourcePolicies()) != 0 {
		t.Errorf("resource policies = %v, want none without placement", res.GetResourcePolicies())
	}
	// PENDING from the insert, RUNNING on the first poll, DONE on the
	// second: Create must have polled until DONE.
	if n := srv.Requests("zoneOperations.get"); n < 2 {
		t.Errorf("operation polled %d times, want at least 2", n)
	}

	want := state.Machine{
		Fleet: "trainers", Name: "trainers-0", Provider: "gcp", SpecHash: fleet.GCP.SpecHash(),
		ID: "1000000", Zone: zone, Region: "us-central1",
		InternalIP: "10.128.0.10", ExternalIP: "35.1.2.10",
		Status: "RUNNING", Spot: true, CreatedAt: m.CreatedAt,
		HostKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ=="},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("record =\n%+v\nwant\n%+v", m, want)
	}
	if time.Since(m.CreatedAt) > time.Minute || m.CreatedAt.IsZero() {
		t.Errorf("CreatedAt = %v, want the creation time", m.CreatedAt)
	}
}

func TestCreateFailsWhenOperationEndsWithErrorBehindHTTP200(t *testing.T) {
	srv := gcptest.Start(t)
	srv.FailInsertOperation(1, gcptest.Stockout)
	p := newProvider(t, gcp.Options{})

	_, err := p.Create(bounded(t), fleetAt(srv.URL), "trainers-0", lineage)

	var gerr *gcp.Error
	if !errors.As(err, &gerr) || gerr.Kind != gcp.Stockout {
		t.Fatalf("err = %v, want a *gcp.Error of kind Stockout", err)
	}
	if gerr.Reason != "ZONE_RESOURCE_POOL_EXHAUSTED" {
		t.Errorf("reason = %q, want the operation's error code", gerr.Reason)
	}
	if n := len(srv.Instances()); n != 0 {
		t.Errorf("instances = %d, want 0", n)
	}
}

func TestPlacementCreatesOnePolicyPerFleetAndReusesIt(t *testing.T) {
	for _, tc := range []struct {
		placement   string
		count       int
		collocation string
		domains     int
	}{
		{config.GCPPlacementCompact, 4, "COLLOCATED", 0},
		{config.GCPPlacementSpread, 1, "", 2},
		{config.GCPPlacementSpread, 5, "", 5},
		{config.GCPPlacementSpread, 20, "", 8},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.placement, tc.count), func(t *testing.T) {
			srv := gcptest.Start(t)
			p := newProvider(t, gcp.Options{})
			fleet := fleetAt(srv.URL)
			fleet.GCP.Placement, fleet.Count = tc.placement, tc.count

			for _, name := range []string{"trainers-0", "trainers-1"} {
				if _, err := p.Create(bounded(t), fleet, name, lineage); err != nil {
					t.Fatal(err)
				}
			}

			want := []gcptest.Policy{{Project: project, Region: "us-central1", Name: "gpulayer-trainers", Collocation: tc.collocation, AvailabilityDomainCount: tc.domains}}
			if got := srv.Policies(); !reflect.DeepEqual(got, want) {
				t.Errorf("policies = %+v, want %+v", got, want)
			}
			if n := srv.Requests("resourcePolicies.insert"); n != 1 {
				t.Errorf("policy inserts = %d, want 1", n)
			}
			url := "projects/my-project/regions/us-central1/resourcePolicies/gpulayer-trainers"
			for _, in := range srv.Instances() {
				if !reflect.DeepEqual(in.ResourcePolicies, []string{url}) {
					t.Errorf("%s: resource policies = %v, want [%s]", in.Name, in.ResourcePolicies, url)
				}
			}
		})
	}
}

func TestListFindsOnlyTheFleetAndLineageAcrossPages(t *testing.T) {
	srv := gcptest.Start(t)
	srv.PageSize = 1
	p := newProvider(t, gcp.Options{})
	ctx := bounded(t)
	fleet := fleetAt(srv.URL)
	other := fleetAt(srv.URL)
	other.Name = "evaluators"
	for _, c := range []struct {
		fleet         *config.Fleet
		name, lineage string
	}{
		{fleet, "trainers-1", lineage},
		{fleet, "trainers-0", lineage},
		{fleet, "trainers-9", "another-state"},
		{other, "evaluators-0", lineage},
	} {
		if _, err := p.Create(ctx, c.fleet, c.name, c.lineage); err != nil {
			t.Fatal(err)
		}
	}
	srv.SetStatus("trainers-1", "TERMINATED")

	got, err := p.List(ctx, fleet, lineage)
	if err != nil {
		t.Fatal(err)
	}

	var names []string
	for _, m := range got {
		names = append(names, m.Name+"="+m.Status)
		if m.InternalIP == "" || m.Region != "us-central1" || m.Provider != "gcp" || !m.Spot {
			t.Errorf("%s: incomplete record %+v", m.Name, m)
		}
	}
	if want := []string{"trainers-0=RUNNING", "trainers-1=TERMINATED"}; !reflect.DeepEqual(names, want) {
		t.Errorf("listed %v, want %v", names, want)
	}
	if n := srv.Requests("instances.list"); n < 2 {
		t.Errorf("list requests = %d, want one per page", n)
	}
}

func TestDeleteWaitsAndMissingMachineIsNotAnError(t *testing.T) {
	srv := gcptest.Start(t)
	p := newProvider(t, gcp.Options{})
	ctx := bounded(t)
	fleet := fleetAt(srv.URL)
	for _, name := range []string{"trainers-0", "trainers-1"} {
		if _, err := p.Create(ctx, fleet, name, lineage); err != nil {
			t.Fatal(err)
		}
	}

	// The fake removes the instance only when the delete operation is
	// DONE: gone afterwards means Delete waited.
	if err := p.Delete(ctx, fleet, "trainers-0"); err != nil {
		t.Fatal(err)
	}
	if in := srv.Instances(); len(in) != 1 || in[0].Name != "trainers-1" {
		t.Errorf("instances after delete = %v, want only trainers-1", in)
	}
	if err := p.Delete(ctx, fleet, "trainers-0"); err != nil {
		t.Errorf("deleting a deleted machine: %v, want nil", err)
	}
	srv.Remove("trainers-1")
	if err := p.Delete(ctx, fleet, "trainers-1"); err != nil {
		t.Errorf("deleting a machine removed out of band: %v, want nil", err)
	}
}

func TestDescribeMissingMachineIsNotFound(t *testing.T) {
	srv := gcptest.Start(t)
	p := newProvider(t, gcp.Options{})
	ctx := bounded(t)
	fleet := fleetAt(srv.URL)
	if _, err := p.Create(ctx, fleet, "trainers-0", lineage); err != nil {
		t.Fatal(err)
	}

	m, found, err := p.Describe(ctx, fleet, "trainers-0")
	if err != nil || !found {
		t.Fatalf("Describe(trainers-0) = found %v, %v; want found", found, err)
	}
	// No host keys published yet (404 from guest attributes) is no error;
	// Describe records no spec hash, only Create knows what it created from.
	if len(m.HostKeys) != 0 || m.SpecHash != "" || m.Physical != nil {
		t.Errorf("record = %+v, want no host keys, spec hash or topology", m)
	}

	srv.Remove("trainers-0")
	_, found, err = p.Describe(ctx, fleet, "trainers-0")
	if err != nil || found {
		t.Errorf("Describe(removed) = found %v, %v; want not found, no error", found, err)
	}
}

func TestErrorsNameProjectZoneMachineTypeAndWhatToTry(t *testing.T) {
	cases := []struct {
		fault gcptest.Fault
		kind  gcp.Kind
		hint  string
	}{
		{gcptest.Quota, gcp.QuotaExceeded, "IAM & Admin > Quotas"},
		{gcptest.Stockout, gcp.Stockout, "try another zone"},
		{gcptest.Permission, gcp.PermissionDenied, "roles/compute.instanceAdmin.v1"},
		{gcptest.ImageNotFound, gcp.ImageNotFound, "Check the image"},
		{gcptest.MachineTypeNotFound, gcp.MachineTypeNotInZone, "gcloud compute machine-types list --zones us-central1-a"},
	}
	for _, how := range []string{"http", "operation"} {
		for _, tc := range cases {
			t.Run(how+"/"+tc.kind.String(), func(t *testing.T) {
				srv := gcptest.Start(t)
				if how == "http" {
					srv.FailInsert(1, tc.fault)
				} else {
					srv.FailInsertOperation(1, tc.fault)
				}
				p := newProvider(t, gcp.Options{})

				_, err := p.Create(bounded(t), fleetAt(srv.URL), "trainers-0", lineage)

				var gerr *gcp.Error
				if !errors.As(err, &gerr) {
					t.Fatalf("err = %v (%T), want *gcp.Error", err, err)
				}
				if gerr.Kind != tc.kind {
					t.Errorf("kind = %v, want %v (%v)", gerr.Kind, tc.kind, err)
				}
				msg := err.Error()
				for _, want := range []string{`"my-project"`, `"us-central1-a"`, `"a2-highgpu-1g"`, `"trainers-0"`, tc.hint} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not contain %q", msg, want)
					}
				}
				if gerr.Message == "" {
					t.Errorf("error %q does not quote the API's message", msg)
				}
			})
		}
	}
}

func TestHangingOperationReturnsContextError(t *testing.T) {
	srv := gcptest.Start(t)
	srv.Hang()
	p := newProvider(t, gcp.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()

	start := time.Now()
	_, err := p.Create(ctx, fleetAt(srv.URL), "trainers-0", lineage)

	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Create returned after %v, want soon after the 300ms deadline", d)
	}
	if n := srv.Requests("zoneOperations.get"); n < 2 {
		t.Errorf("operation polled %d times, want it polled while waiting", n)
	}
}

func TestEndpointEnvIsHonouredAndFleetEndpointWins(t *testing.T) {
	fromEnv, fromFleet := gcptest.Start(t), gcptest.Start(t)
	t.Setenv(gcp.EndpointEnv, fromEnv.URL)
	p := newProvider(t, gcp.Options{})
	ctx := bounded(t)

	fleet := fleetAt("")
	if _, err := p.Create(ctx, fleet, "trainers-0", lineage); err != nil {
		t.Fatal(err)
	}
	// With a trailing slash, as docs/language.md writes endpoints.
	fleet = fleetAt(fromFleet.URL + "/")
	if _, err := p.Create(ctx, fleet, "trainers-1", lineage); err != nil {
		t.Fatal(err)
	}

	if in := fromEnv.Instances(); len(in) != 1 || in[0].Name != "trainers-0" {
		t.Errorf("%s's instances = %v, want trainers-0", gcp.EndpointEnv, in)
	}
	if in := fromFleet.Instances(); len(in) != 1 || in[0].Name != "trainers-1" {
		t.Errorf("fleet endpoint's instances = %v, want trainers-1", in)
	}
}

func TestFleetWithoutGCPBlockIsErrNoProvider(t *testing.T) {
	p := newProvider(t, gcp.Options{Endpoint: "http://127.0.0.1:1"})
	_, err := p.Create(bounded(t), &config.Fleet{Name: "static"}, "static-0", lineage)
	if !errors.Is(err, providers.ErrNoProvider) {
		t.Errorf("err = %v, want ErrNoProvider", err)
	}
}

func TestConcurrentCreatesShareOnePlacementPolicy(t *testing.T) {
	srv := gcptest.Start(t)
	p := newProvider(t, gcp.Options{})
	ctx := bounded(t)
	fleet := fleetAt(srv.URL)
	fleet.GCP.Placement, fleet.Count = config.GCPPlacementCompact, 6

	errs := make(chan error, fleet.Count)
	for i := range fleet.Count {
		go func() {
			_, err := p.Create(ctx, fleet, fmt.Sprintf("trainers-%d", i), lineage)
			errs <- err
		}()
	}
	for range fleet.Count {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}

	// Racing Creates may each find no policy and insert one: the losers'
	// 409 must not fail their machine.
	if got := srv.Policies(); len(got) != 1 {
		t.Errorf("policies = %+v, want one", got)
	}
	if n := len(srv.Instances()); n != fleet.Count {
		t.Errorf("instances = %d, want %d", n, fleet.Count)
	}
}

func TestCreateOnDemandWithMachineTypesOwnGPUs(t *testing.T) {
	srv := gcptest.Start(t)
	p := newProvider(t, gcp.Options{})
	fleet := fleetAt(srv.URL)
	g := fleet.GCP
	g.MachineType, g.AcceleratorType, g.AcceleratorCount = "a3-highgpu-8g", "", 0
	g.Spot, g.DiskSizeGB, g.ServiceAccount, g.Tags = false, 0, "", nil
	g.Network, g.Subnetwork = "projects/my-project/global/networks/train", "regions/us-central1/subnetworks/train-a"

	m, err := p.Create(bounded(t), fleet, "trainers-0", lineage)
	if err != nil {
		t.Fatal(err)
	}

	in := srv.Instances()[0]
	if len(in.Accelerators) != 0 {
		t.Errorf("accelerators = %v, want none: the machine type brings its GPUs", in.Accelerators)
	}
	if want := (gcptest.Scheduling{OnHostMaintenance: "TERMINATE"}); in.Scheduling != want {
		t.Errorf("scheduling = %+v, want %+v", in.Scheduling, want)
	}
	res := in.Resource
	if res.GetDisks()[0].GetInitializeParams().DiskSizeGb != nil || len(res.GetServiceAccounts()) != 0 || res.GetTags() != nil {
		t.Errorf("resource = %v, want no disk size, service account or tags when the block sets none", res)
	}
	nic := res.GetNetworkInterfaces()[0]
	if nic.GetNetwork() != g.Network || nic.GetSubnetwork() != g.Subnetwork {
		t.Errorf("network interface = %v, want network %s, subnetwork %s", nic, g.Network, g.Subnetwork)
	}
	if m.Spot {
		t.Error("record says Spot for an on-demand machine")
	}
}
