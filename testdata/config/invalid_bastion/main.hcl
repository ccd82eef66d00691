ssh "lab" {
  bastion = "ubuntu@"
}
