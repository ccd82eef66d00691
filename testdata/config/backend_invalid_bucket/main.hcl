backend "gcs" {
  bucket = "My_Bucket"
  prefix = "gpulayer/prod"
}
