/* tf_c_serve: run a SavedModel with TensorFlow's C API, as a C++ TensorFlow Serving process does:
 * no Python anywhere in this process.
 *
 *   tf_c_serve MODEL_DIR WORK_DIR
 *
 * WORK_DIR/inputs.txt has one request a line (TENSOR is OPERATION:INDEX, DTYPE a TF_DataType number,
 * FILE a name in WORK_DIR holding the tensor's raw bytes in row-major order):
 *
 *   feed TENSOR DTYPE NDIMS DIM... FILE
 *   fetch TENSOR
 *
 * The model is loaded with the tag "serve" (TF_LoadSessionFromSavedModel) and run once
 * (TF_SessionRun). Fetch K is written to WORK_DIR/out_K.bin, raw, and described by the line
 * "K DTYPE NDIMS DIM... out_K.bin" in WORK_DIR/outputs.txt. Prints "tensorflow VERSION" on stdout.
 * On failure: a message on stderr (TensorFlow's own, TF_Message) and exit status 1.
 * Environment variables such as XLA_FLAGS are read by TensorFlow itself.
 */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/c_api.h"

#define MAX_NAME 4096
#define MAX_DIMS 64

typedef struct {
    char name[MAX_NAME];
    TF_Output output;
} Endpoint;

static const char *work_dir;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tf_c_serve: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static void check(TF_Status *status, const char *doing) {
    if (TF_GetCode(status) != TF_OK) die("%s failed: %s", doing, TF_Message(status));
}

static void *grow(void *p, size_t n, size_t size) {
    p = realloc(p, n * size);
    if (!p) die("out of memory");
    return p;
}

static char *in_work_dir(const char *file) {
    size_t n = strlen(work_dir) + strlen(file) + 2;
    char *path = malloc(n);
    if (!path) die("out of memory");
    snprintf(path, n, "%s/%s", work_dir, file);
    return path;
}

/* "op:3" -> the graph's operation "op", output 3. */
static TF_Output find_output(TF_Graph *graph, const char *tensor) {
    char op_name[MAX_NAME];
    const char *colon = strrchr(tensor, ':');
    size_t len = colon ? (size_t)(colon - tensor) : strlen(tensor);
    if (len >= sizeof op_name) die("tensor name too long: %s", tensor);
    memcpy(op_name, tensor, len);
    op_name[len] = '\0';
    TF_Output out = {TF_GraphOperationByName(graph, op_name), colon ? atoi(colon + 1) : 0};
    if (!out.oper) die("the model has no operation named '%s' (tensor %s)", op_name, tensor);
    if (out.index < 0 || out.index >= TF_OperationNumOutputs(out.oper))
        die("operation '%s' has no output %d", op_name, out.index);
    return out;
}

static TF_Tensor *read_tensor(const char *tensor, TF_DataType dtype, int ndims, const int64_t *dims,
                              const char *file) {
    size_t item = TF_DataTypeSize(dtype), count = 1;
    if (item == 0) die("input %s: dtype %d has no fixed size (strings and resources are not supported)", tensor,
                       (int)dtype);
    for (int i = 0; i < ndims; i++) count *= (size_t)dims[i];
    size_t nbytes = count * item;
    char *path = in_work_dir(file);
    FILE *f = fopen(path, "rb");
    if (!f) die("input %s: cannot open %s", tensor, path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < 0 || (size_t)size != nbytes)
        die("input %s: %s holds %ld bytes, its dtype and shape need %zu", tensor, path, size, nbytes);
    TF_Tensor *t = TF_AllocateTensor(dtype, dims, ndims, nbytes);
    if (!t) die("input %s: cannot allocate %zu bytes", tensor, nbytes);
    if (nbytes > 0 && fread(TF_TensorData(t), 1, nbytes, f) != nbytes)
        die("input %s: short read from %s", tensor, path);
    fclose(f);
    free(path);
    return t;
}

static void write_tensor(FILE *manifest, int k, const TF_Tensor *t) {
    char file[64];
    snprintf(file, sizeof file, "out_%d.bin", k);
    char *path = in_work_dir(file);
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write %s", path);
    size_t n = TF_TensorByteSize(t);
    if (n && fwrite(TF_TensorData(t), 1, n, f) != n) die("short write to %s", path);
    if (fclose(f) != 0) die("cannot write %s", path);
    free(path);
    fprintf(manifest, "%d %d %d", k, (int)TF_TensorType(t), TF_NumDims(t));
    for (int i = 0; i < TF_NumDims(t); i++) fprintf(manifest, " %lld", (long long)TF_Dim(t, i));
    fprintf(manifest, " %s\n", file);
}

int main(int argc, char **argv) {
    if (argc != 3) die("usage: tf_c_serve MODEL_DIR WORK_DIR");
    const char *model_dir = argv[1];
    work_dir = argv[2];

    TF_Status *status = TF_NewStatus();
    TF_Graph *graph = TF_NewGraph();
    TF_SessionOptions *options = TF_NewSessionOptions();
    const char *tags[] = {"serve"};
    TF_Session *session = TF_LoadSessionFromSavedModel(options, NULL, model_dir, tags, 1, graph, NULL, status);
    check(status, "loading the SavedModel (tag 'serve')");

    char *manifest_path = in_work_dir("inputs.txt");
    FILE *manifest = fopen(manifest_path, "r");
    if (!manifest) die("cannot open %s", manifest_path);
    Endpoint *feeds = NULL, *fetches = NULL;
    TF_Tensor **feed_values = NULL;
    int n_feeds = 0, n_fetches = 0;
    char word[16];
    while (fscanf(manifest, "%15s", word) == 1) {
        char tensor[MAX_NAME];
        if (fscanf(manifest, "%4095s", tensor) != 1) die("%s: a tensor name must follow '%s'", manifest_path, word);
        if (strcmp(word, "feed") == 0) {
            int dtype, ndims;
            int64_t dims[MAX_DIMS];
            char file[MAX_NAME];
            if (fscanf(manifest, "%d %d", &dtype, &ndims) != 2 || ndims < 0 || ndims > MAX_DIMS)
                die("%s: feed %s: bad dtype or rank", manifest_path, tensor);
            for (int i = 0; i < ndims; i++) {
                long long d;
                if (fscanf(manifest, "%lld", &d) != 1 || d < 0)
                    die("%s: feed %s: bad dimension", manifest_path, tensor);
                dims[i] = d;
            }
            if (fscanf(manifest, "%4095s", file) != 1) die("%s: feed %s: no file", manifest_path, tensor);
            feeds = grow(feeds, n_feeds + 1, sizeof *feeds);
            feed_values = grow(feed_values, n_feeds + 1, sizeof *feed_values);
            snprintf(feeds[n_feeds].name, MAX_NAME, "%s", tensor);
            feeds[n_feeds].output = find_output(graph, tensor);
            TF_DataType expected = TF_OperationOutputType(feeds[n_feeds].output);
            if (expected != (TF_DataType)dtype)
                die("feed %s: the model takes dtype %d, got %d", tensor, (int)expected, dtype);
            feed_values[n_feeds] = read_tensor(tensor, (TF_DataType)dtype, ndims, dims, file);
            n_feeds++;
        } else if (strcmp(word, "fetch") == 0) {
            fetches = grow(fetches, n_fetches + 1, sizeof *fetches);
            snprintf(fetches[n_fetches].name, MAX_NAME, "%s", tensor);
            fetches[n_fetches].output = find_output(graph, tensor);
            n_fetches++;
        } else {
            die("%s: unknown request '%s' (feed or fetch)", manifest_path, word);
        }
    }
    fclose(manifest);
    free(manifest_path);

    TF_Output *feed_ops = grow(NULL, n_feeds + 1, sizeof *feed_ops);
    TF_Output *fetch_ops = grow(NULL, n_fetches + 1, sizeof *fetch_ops);
    TF_Tensor **fetch_values = grow(NULL, n_fetches + 1, sizeof *fetch_values);
    for (int i = 0; i < n_feeds; i++) feed_ops[i] = feeds[i].output;
    for (int i = 0; i < n_fetches; i++) fetch_ops[i] = fetches[i].output, fetch_values[i] = NULL;

    TF_SessionRun(session, NULL, feed_ops, feed_values, n_feeds, fetch_ops, fetch_values, n_fetches, NULL, 0, NULL,
                  status);
    check(status, "TF_SessionRun");

    char *outputs_path = in_work_dir("outputs.txt");
    FILE *outputs = fopen(outputs_path, "w");
    if (!outputs) die("cannot write %s", outputs_path);
    for (int i = 0; i < n_fetches; i++) {
        if (!fetch_values[i]) die("fetch %s returned no tensor", fetches[i].name);
        write_tensor(outputs, i, fetch_values[i]);
        TF_DeleteTensor(fetch_values[i]);
    }
    if (fclose(outputs) != 0) die("cannot write %s", outputs_path);
    free(outputs_path);
    printf("tensorflow %s\n", TF_Version());

    for (int i = 0; i < n_feeds; i++) TF_DeleteTensor(feed_values[i]);
    TF_CloseSession(session, status);
    check(status, "closing the session");
    TF_DeleteSession(session, status);
    TF_DeleteSessionOptions(options);
    TF_DeleteGraph(graph);
    TF_DeleteStatus(status);
    free(feeds), free(fetches), free(feed_values), free(feed_ops), free(fetch_ops), free(fetch_values);
    return 0;
}
