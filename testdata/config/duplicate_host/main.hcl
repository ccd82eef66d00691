fleet "lab" {
  host "a1" { address = "10.0.0.1" }
}

fleet "office" {
  host "b1" { address = "10.9.0.1" }
  host "a1" { address = "10.9.0.2" }
}
