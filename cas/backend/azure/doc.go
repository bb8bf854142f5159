// Package azure is a tier.Backend on an Azure Blob Storage container,
// through the Azure SDK's azblob: the shared tier of many membuf serve
// nodes (--upstream azblob://ACCOUNT/CONTAINER/PREFIX).
//
// An entry is a block blob named as the S3 tier names its objects,
// {prefix}cas/{hash} for a blob and {prefix}ac/{hash} for an action
// result, with the Upload's SHA-256 in its metadata (sha256) and given
// back as Object.SHA256. Credentials come from the environment, never the
// URL: a shared key (AZURE_STORAGE_KEY), a SAS token
// (AZURE_STORAGE_SAS_TOKEN), else azidentity's DefaultAzureCredential.
//
// Its own module, so that the Azure SDK stays out of the others; it
// imports cas, cas/tier and cas/backend/internal/objstore.
package azure
