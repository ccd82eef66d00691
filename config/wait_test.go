package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMaxWaitAndExpectedDurationAreDecoded(t *testing.T) {
	dir := t.TempDir()
	src := `
policy "close" {
  max_wait = "15m"
}
job "pretrain" {
  nodes             = 2
  command           = ["python", "pretrain.py"]
  expected_duration = "6h30m"
}
job "train" {
  policy  = policy.close
  nodes   = 2
  command = ["python", "train.py"]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(dir, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	byName := map[string]*Job{}
	for _, j := range cfg.Jobs {
		byName[j.Name] = j
	}
	if got := byName["pretrain"].ExpectedDuration; got != 6*time.Hour+30*time.Minute {
		t.Errorf("expected_duration %s", got)
	}
	if got := byName["train"].EffectivePolicy().MaxWait; got != 15*time.Minute {
		t.Errorf("max_wait %s", got)
	}
	if got := byName["pretrain"].EffectivePolicy().MaxWait; got != 0 {
		t.Errorf("the default policy's max_wait is %s; it never waits", got)
	}
}

func TestMaxWaitUnderARequiredLevelSaysItAlreadyWaits(t *testing.T) {
	_, diags := Load(filepath.Join(fixtures, "max_wait_without_prefer"), LoadOptions{})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `under group_locality "zone" the job already waits for its level`) {
		t.Fatalf("diagnostics: %s", diagList(diags))
	}
}
