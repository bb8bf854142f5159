// Package azure is a tier.Backend on an Azure Blob Storage container,
// through the Blob service's REST API on net/http: the shared tier of
// many membuf serve nodes (--upstream azblob://ACCOUNT/CONTAINER/PREFIX).
//
// An entry is a block blob named as the S3 tier names its objects,
// {prefix}cas/{hash} for a blob and {prefix}ac/{hash} for an action
// result, with the Upload's SHA-256 in its metadata (sha256) and given
// back as Object.SHA256. Credentials come from the environment, never the
// URL: a shared key (AZURE_STORAGE_KEY), a SAS token
// (AZURE_STORAGE_SAS_TOKEN), else DefaultAzureCredential's chain as the
// Azure SDKs follow it: a client secret or certificate, workload
// identity, managed identity, the Azure CLI (a PKCS #12 certificate, a
// user's password, Azure Arc's and Service Fabric's managed identity are
// refused at start, naming what to use).
//
// Its own module, as the other object stores are; it imports cas,
// cas/tier and cas/backend/internal/objstore, and no SDK.
package azure
