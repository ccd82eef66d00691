ssh "lab" {
  user = "ubuntu"
}

fleet "lab" {
  ssh = ssh.labs
  host "a1" { address = "10.0.0.1" }
}
