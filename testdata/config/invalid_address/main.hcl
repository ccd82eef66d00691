fleet "lab" {
  host "a1" { address = "10.0.0.1" }
  host "a2" { address = "10.0.0.2:22:22" }
}
