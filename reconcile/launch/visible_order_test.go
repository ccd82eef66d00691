package launch

import "testing"

// TestVisibleDevicesKeepThePlacementsOrder: CUDA_VISIBLE_DEVICES lists a
// node's GPUs in the order placement gave them (local-rank order, so that
// neighbouring local ranks share the fastest links), by UUID when every
// one is known and by index otherwise; never re-sorted.
func TestVisibleDevicesKeepThePlacementsOrder(t *testing.T) {
	n := Node{GPUs: []int{0, 3, 2, 1}, GPUUUIDs: []string{"GPU-0", "GPU-3", "GPU-2", "GPU-1"}}
	if got := visibleDevices(n); got != "GPU-0,GPU-3,GPU-2,GPU-1" {
		t.Errorf("by UUID: %q", got)
	}
	n.GPUUUIDs = nil
	if got := visibleDevices(n); got != "0,3,2,1" {
		t.Errorf("by index: %q", got)
	}
}
