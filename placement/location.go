package placement

import "fmt"

// Location is where a worker is, from the loosest level to the tightest. An
// empty field means unknown at that level (ADR-0021 §1). Zones are taken
// inside their region and network groups inside their zone: two zones named
// "a" in different regions are different zones.
type Location struct {
	Region       string `json:"region,omitempty"`
	Zone         string `json:"zone,omitempty"`
	NetworkGroup string `json:"network_group,omitempty"`
}

// Level is a locality level, from the tightest (NetworkGroup) to the loosest
// (Any). A group "at level L" shares one value at L and every looser level.
type Level uint8

const (
	LevelNetworkGroup Level = iota // one rack, LAN or switch, as the operator labels it
	LevelZone                      // one zone (europe-west1-b)
	LevelRegion                    // one region (europe-west1)
	LevelAny                       // location ignored
)

// levelNames are the names used in HCL, JSON and the explanation.
var levelNames = [...]string{"network_group", "zone", "region", "any"}

// levelWords are the names used in summaries ("same network group rack-3").
var levelWords = [...]string{"network group", "zone", "region", "location"}

// String is the level's HCL name: "network_group", "zone", "region", "any".
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
	for i, n := range levelNames {
		if s == n {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("unknown locality level %q (want network_group, zone, region or any)", s)
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

// At is the location's value at level l: the network group, zone or region;
// "" when unknown and always "" for Any.
func (loc Location) At(l Level) string {
	switch l {
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
	case LevelNetworkGroup:
		return loc
	case LevelZone:
		return Location{Region: loc.Region, Zone: loc.Zone}
	case LevelRegion:
		return Location{Region: loc.Region}
	}
	return Location{}
}

// String writes the known fields from loosest to tightest, joined by "/":
// "europe-west1/europe-west1-b/rack-3"; "" when nothing is known.
func (loc Location) String() string {
	s := loc.Region
	for _, f := range [...]string{loc.Zone, loc.NetworkGroup} {
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
