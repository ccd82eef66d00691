fleet "lab" {
  host "a1" { address = "fd00::1" }
}
