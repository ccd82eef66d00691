package facts

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// LocationClaim is one source's word on where a host is.
type LocationClaim struct {
	Source       string // SourceProvider, a metadata source (SourceGCEMetadata, SourceEC2Metadata, SourceAzureMetadata), SourceHost or SourceFleet
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

// MetadataClaim is the claim of the metadata service (GCE, EC2 or Azure)
// that a probe recorded as loc, the zero claim when loc came from none.
func MetadataClaim(loc Location) LocationClaim {
	switch loc.Source {
	case SourceGCEMetadata, SourceEC2Metadata, SourceAzureMetadata:
		return LocationClaim{Source: loc.Source, Region: loc.Region, Zone: loc.Zone}
	}
	return LocationClaim{}
}

// BesideMetadata returns the configuration's claims (the host block's and
// the fleet's) as they may be merged below md: where md names a region
// and no zone (an Azure VM in no availability zone), a configured zone is
// kept only where the configuration puts the host in that same region, so
// that no host lands in a zone of another region.
func BesideMetadata(md, host, fleet LocationClaim) (LocationClaim, LocationClaim) {
	if md.Region != "" && md.Zone == "" && ResolveLocation(host, fleet).Region != md.Region {
		host.Zone, fleet.Zone = "", ""
	}
	return host, fleet
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

// The metadata services' answers are the machine's word: each is checked
// for the shape of what it names before it is believed, and quoted
// escaped and cut (clip) when it is not.
var (
	// awsRegion is the shape of an AWS region: us-east-1, eu-central-2,
	// us-gov-west-1, cn-north-1.
	awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	// awsZoneSuffix is what follows the region in an availability zone:
	// "a" (us-east-1a), "-lax-1a" (a Local Zone), "-wl1-bos-wlz-1" (a
	// Wavelength Zone).
	awsZoneSuffix = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	// azureLocation is the shape of an Azure region: eastus, westeurope.
	azureLocation = regexp.MustCompile(`^[a-z][a-z0-9]{1,39}$`)
	// azureZone is an Azure availability zone: "1", "2", "3", or "" for a
	// VM in none.
	azureZone = regexp.MustCompile(`^([1-9][0-9]?)?$`)
)

// maxAzureCompute bounds the Azure compute document read (a few KiB, most
// of it tags and image details).
const maxAzureCompute = 64 << 10

// metadataFailure says why a metadata section has no answer.
func metadataFailure(exit int) string {
	switch exit {
	case exitNotFound:
		return "neither curl nor wget is installed (exit 127)"
	case exitTimeout:
		return "no answer in time (exit 124)"
	case 2:
		return "its session token is not one (exit 2)"
	}
	return "exit " + strconv.Itoa(exit)
}

// metadataAnswered reports whether section s holds an answer of the
// metadata service who to read, warning why not: a service failed, or a
// location was already given (no run of the script asks two services).
func (h *Host) metadataAnswered(who string, s section) bool {
	if h.Location.Source != "" {
		h.warn("%s: ignored, the machine's location was already given by %s", who, h.Location.Source)
		return false
	}
	if s.exit != 0 {
		h.warn("%s: no location: %s", who, metadataFailure(s.exit))
		return false
	}
	return true
}

func (h *Host) parseGCEZone(secs map[string]section) {
	s, ok := secs[sectionGCEZone]
	if !ok {
		if strings.Contains(h.ProductName, "Google Compute Engine") {
			h.warn("the machine says it is on Google Compute Engine but its metadata zone was not asked")
		}
		return
	}
	v := h.field("GCE metadata zone", firstLine(s.text))
	if s.exit != 0 || v == "" {
		h.warn("GCE metadata server: no zone (exit %d)", s.exit)
		return
	}
	// The server answers projects/NUMBER/zones/ZONE.
	zone := v[strings.LastIndexByte(v, '/')+1:]
	region := GCERegion(zone)
	if region == "" {
		h.warn("GCE metadata server: unexpected zone %q", clip(v))
		return
	}
	h.Location = Location{Region: region, Zone: zone, Source: SourceGCEMetadata}
}

// parseEC2Location reads the availability zone and the region the EC2
// instance metadata service named (probe.sh's gpulayer_ec2_location). The
// zone must be of the region: one the service names for another region
// is not believed.
func (h *Host) parseEC2Location(s section) {
	const who = "EC2 instance metadata service"
	if !h.metadataAnswered(who, s) {
		return
	}
	lines := strings.Split(strings.TrimRight(s.text, "\n"), "\n")
	if len(lines) != 2 {
		h.warn("%s: unexpected answer %q", who, clip(s.text))
		return
	}
	zone, region := strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])
	if len(region) > 32 || !awsRegion.MatchString(region) {
		h.warn("%s: unexpected region %q", who, clip(region))
		return
	}
	if suffix, ok := strings.CutPrefix(zone, region); !ok || !awsZoneSuffix.MatchString(suffix) {
		h.warn("%s: unexpected availability zone %q for region %q", who, clip(zone), region)
		return
	}
	h.Location = Location{Region: region, Zone: zone, Source: SourceEC2Metadata}
}

// parseAzureLocation reads the region (location) and availability zone of
// the Azure instance metadata service's compute document. An Azure zone
// is a number scoped to its region ("1" of eastus is not "1" of
// westeurope), so the zone recorded is REGION-NUMBER ("eastus-1"): zones
// of different regions never compare equal. A VM in no zone has a region
// only.
func (h *Host) parseAzureLocation(s section) {
	const who = "Azure instance metadata service"
	if !h.metadataAnswered(who, s) {
		return
	}
	if len(s.text) > maxAzureCompute {
		h.warn("%s: its compute document is %d bytes, more than %d: not read", who, len(s.text), maxAzureCompute)
		return
	}
	var doc struct {
		Location string `json:"location"`
		Zone     string `json:"zone"`
	}
	if err := json.Unmarshal([]byte(s.text), &doc); err != nil {
		h.warn("%s: unexpected answer %q", who, clip(s.text))
		return
	}
	if !azureLocation.MatchString(doc.Location) {
		h.warn("%s: unexpected location %q", who, clip(doc.Location))
		return
	}
	if !azureZone.MatchString(doc.Zone) {
		h.warn("%s: unexpected zone %q in %s", who, clip(doc.Zone), doc.Location)
		return
	}
	loc := Location{Region: doc.Location, Source: SourceAzureMetadata}
	if doc.Zone != "" {
		loc.Zone = doc.Location + "-" + doc.Zone
	}
	h.Location = loc
}
