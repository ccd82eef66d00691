package facts

import "strings"

// LocationClaim is one source's word on where a host is.
type LocationClaim struct {
	Source       string // SourceProvider, SourceGCEMetadata, SourceHost or SourceFleet
	Region       string
	Zone         string
	NetworkGroup string
}

// ResolveLocation merges claims field by field: each of region, zone and
// network group comes from the first claim that has it, so claims are given
// from the most trusted to the least: the provider's record, GCE metadata,
// the host block, the fleet's defaults. The provider and GCE metadata name a
// region and a zone together, so a host is never put in a zone of another
// region by them. Source is the most trusted source that supplied any field.
func ResolveLocation(claims ...LocationClaim) Location {
	var loc Location
	for _, c := range claims {
		used := false
		if loc.Region == "" && c.Region != "" {
			loc.Region, used = c.Region, true
		}
		if loc.Zone == "" && c.Zone != "" {
			loc.Zone, used = c.Zone, true
		}
		if loc.NetworkGroup == "" && c.NetworkGroup != "" {
			loc.NetworkGroup, used = c.NetworkGroup, true
		}
		if used && loc.Source == "" {
			loc.Source = c.Source
		}
	}
	return loc
}

// GCERegion returns the region of a GCE zone: "europe-west1" for
// "europe-west1-b", "" when zone has no dash.
func GCERegion(zone string) string {
	i := strings.LastIndexByte(zone, '-')
	if i <= 0 {
		return ""
	}
	return zone[:i]
}
