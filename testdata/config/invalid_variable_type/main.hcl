variable "zone" {
  type    = strng
  default = "europe-west1-b"
}
