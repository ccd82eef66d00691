fleet "cloud" {
  count = 1
  gcp {
    project      = "my-project"
    zone         = "us-central1-a"
    machine_type = "a2-highgpu-1g"
    image        = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
    placement    = "compactt"
  }
}
