fleet "cloud" {
  gcp {
    project      = "my-project"
    zone         = "europe-west1-b"
    machine_type = "a2-highgpu-4g"
    image        = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
  }
}
