fleet "lab" {
  region = "paris"

  host "a1" {
    address = "10.1.0.11"
  }
}
