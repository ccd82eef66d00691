fleet "lab" {
  count = 2
  host "a1" { address = "10.0.0.1" }
}
