variable "zone" {
  default = "europe-west1-b"
}

fleet "lab" {
  zone = vars.zone
  host "a1" { address = "10.0.0.1" }
}
