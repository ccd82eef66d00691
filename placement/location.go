package placement

import (
	"fmt"
	"strings"
)

// Location is where a worker is, from the loosest level to the tightest. An
// empty field means unknown at that level (ADR-0021 §1). Zones are taken
// inside their region, network groups inside their zone and NVLink domains
// inside their network group: two zones named "a" in different regions are
// different zones.
type Location struct {
	Region       string `json:"region,omitempty"`
	Zone         string `json:"zone,omitempty"`
	NetworkGroup string `json:"network_group,omitempty"`
	// NVLinkDomain is the multi-node NVLink fabric clique every GPU of the
	// machine is registered in, "CLUSTER_UUID:CLIQUE_ID"
	// (topology.NVLinkDomain): the machines of one GB200 NVL72 rack.
	NVLinkDomain string `json:"nvlink_domain,omitempty"`
}

// Level is a locality level, from the tightest (NVLinkDomain) to the loosest
// (Any). A group "at level L" shares one value at L and every looser level.
// Levels are written by name (MarshalText), never by number.
type Level uint8

const (
	LevelNVLinkDomain Level = iota // machines whose GPUs share one NVLink fabric clique (an NVL72 rack)
	LevelNetworkGroup              // one rack, LAN or switch, as the operator labels it
	LevelZone                      // one zone (europe-west1-b)
	LevelRegion                    // one region (europe-west1)
	LevelAny                       // location ignored
)

// levelNames are the names used in HCL, JSON and the explanation.
var levelNames = [...]string{"nvlink_domain", "network_group", "zone", "region", "any"}

// levelWords are the names used in summaries ("same network group rack-3").
var levelWords = [...]string{"NVLink domain", "network group", "zone", "region", "location"}

// String is the level's HCL name: "nvlink_domain", "network_group", "zone",
// "region", "any".
func (l Level) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// words is the level's name in a sentence.
func (l Level) words() string {
	if int(l) < len(levelWords) {
		return levelWords[l]
	}
	return l.String()
}

// ParseLevel reads a level's HCL name.
func ParseLevel(s string) (Level, error) {
	if l, ok := levelNamed(s); ok {
		return l, nil
	}
	return 0, fmt.Errorf("unknown locality level %q (want nvlink_domain, network_group, zone, region or any)", s)
}

// levelNamed is ParseLevel without the error, for callers that only ask
// whether a name is a level: Schedule checks the group locality ("prefer"
// by default, no level) twice a call, and the error's formatting was a
// tenth of a 500-worker call's allocations.
func levelNamed(s string) (Level, bool) {
	for i, n := range levelNames {
		if s == n {
			return Level(i), true
		}
	}
	return 0, false
}

// MarshalText writes the level's name, so it reads as "zone" in JSON.
func (l Level) MarshalText() ([]byte, error) {
	if int(l) >= len(levelNames) {
		return nil, fmt.Errorf("unknown locality level %d", uint8(l))
	}
	return []byte(levelNames[l]), nil
}

// UnmarshalText reads a level's name with ParseLevel.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// At is the location's value at level l: the NVLink domain, network group,
// zone or region; "" when unknown and always "" for Any.
func (loc Location) At(l Level) string {
	switch l {
	case LevelNVLinkDomain:
		return loc.NVLinkDomain
	case LevelNetworkGroup:
		return loc.NetworkGroup
	case LevelZone:
		return loc.Zone
	case LevelRegion:
		return loc.Region
	}
	return ""
}

// Upto keeps the fields at level l and looser ones: the location of the
// group a worker belongs to at that level.
func (loc Location) Upto(l Level) Location {
	switch l {
	case LevelNVLinkDomain:
		return loc
	case LevelNetworkGroup:
		return Location{Region: loc.Region, Zone: loc.Zone, NetworkGroup: loc.NetworkGroup}
	case LevelZone:
		return Location{Region: loc.Region, Zone: loc.Zone}
	case LevelRegion:
		return Location{Region: loc.Region}
	}
	return Location{}
}

// String writes the known fields from loosest to tightest, joined by "/":
// "europe-west1/europe-west1-b/rack-3", and an NVLink domain by its
// DomainName ("europe-west1/europe-west1-b/rack-3/9f3c21ab:1"); "" when
// nothing is known.
func (loc Location) String() string {
	s := loc.Region
	for _, f := range [...]string{loc.Zone, loc.NetworkGroup, DomainName(loc.NVLinkDomain)} {
		if f == "" {
			continue
		}
		if s != "" {
			s += "/"
		}
		s += f
	}
	return s
}

// words is the location's value at level l as a sentence names it: the
// NVLink domain by DomainName, others as they are.
func (loc Location) words(l Level) string {
	if l == LevelNVLinkDomain {
		return DomainName(loc.NVLinkDomain)
	}
	return loc.At(l)
}

// DomainName is an NVLink domain id as plans print it: the first block of
// the cluster UUID and the clique id ("9f3c21ab:32766"), which tells the
// domains of one fleet apart without a 47-character UUID in every line.
// An id not of that shape (it came from a machine) is cut to 24 bytes of
// letters, digits and -:._, the rest dropped.
func DomainName(id string) string {
	if id == "" {
		return ""
	}
	if uuid, clique, ok := strings.Cut(id, ":"); ok && len(uuid) == 36 && uuid[8] == '-' && len(clique) > 0 && len(clique) <= 10 &&
		strings.IndexFunc(uuid[:8], notNameByte) < 0 && strings.IndexFunc(clique, notNameByte) < 0 {
		return uuid[:8] + ":" + clique
	}
	var b strings.Builder
	for i := 0; i < len(id) && b.Len() < 24; i++ {
		if c := id[i]; !notNameByte(rune(c)) {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// notNameByte says c is not one of the bytes a domain's printed name
// keeps: letters, digits and -:._ (so the short form, too, holds nothing
// a machine could make a terminal act on).
func notNameByte(c rune) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-:._", c))
}
