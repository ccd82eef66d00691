fleet "lab" {
  host "cloud-1" { address = "10.0.0.1" }
}

fleet "cloud" {
  count = 2
  gcp {
    project      = "my-project"
    zone         = "us-central1-a"
    machine_type = "a2-highgpu-1g"
    image        = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
  }
}
