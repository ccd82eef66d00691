package nvmltopo

import (
	"fmt"
	"strconv"
	"strings"
)

// pciAddress is a PCI function's address. NVML writes a GPU's as
// "00000000:07:00.0" but the far end of an NVLink sometimes with a 4-digit
// domain ("0000:07:00.0"); both parse to the same value, so the two can be
// matched and sorted numerically.
type pciAddress struct {
	domain   uint32
	bus      uint8
	device   uint8
	function uint8
}

// parsePCIAddress reads "[domain:]bus:device.function" in hex, any case.
func parsePCIAddress(s string) (pciAddress, error) {
	var a pciAddress
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return a, fmt.Errorf("PCI address %q: want [domain:]bus:device.function", s)
	}
	dev, fn, ok := strings.Cut(parts[2], ".")
	if !ok {
		return a, fmt.Errorf("PCI address %q: no function after the device (want device.function)", s)
	}
	fields := []struct {
		text string
		bits int
		max  uint64
		name string
	}{
		{parts[0], 32, 0xffffffff, "domain"},
		{parts[1], 8, 0xff, "bus"},
		{dev, 8, 0x1f, "device"},
		{fn, 8, 0x7, "function"},
	}
	var v [4]uint64
	for i, f := range fields {
		n, err := strconv.ParseUint(f.text, 16, f.bits)
		if err != nil || n > f.max {
			return a, fmt.Errorf("PCI address %q: bad %s %q", s, f.name, f.text)
		}
		v[i] = n
	}
	return pciAddress{domain: uint32(v[0]), bus: uint8(v[1]), device: uint8(v[2]), function: uint8(v[3])}, nil
}

// String writes the address as NVML does for GPUs: "00000000:07:00.0".
func (a pciAddress) String() string {
	return fmt.Sprintf("%08X:%02X:%02X.%X", a.domain, a.bus, a.device, a.function)
}

// less orders addresses as the PCI bus does: domain, bus, device, function.
func (a pciAddress) less(b pciAddress) bool {
	if a.domain != b.domain {
		return a.domain < b.domain
	}
	if a.bus != b.bus {
		return a.bus < b.bus
	}
	if a.device != b.device {
		return a.device < b.device
	}
	return a.function < b.function
}

// cString reads a NUL-terminated C char array, as NVML fills PciInfo.BusId.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
