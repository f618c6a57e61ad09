//! `kiln.models`: the models of kiln-models (sentence embeddings) as Python classes. The
//! pure-Python side (python/kiln/models.py) handles str-or-list inputs and keyword defaults.

use crate::errors::to_pyerr;
use kiln_core::device::Device;
use kiln_models::{
    replicas, ClipModel, EncodeOptions, ImageEmbedder, LoadOptions, ModelError, Precision, Replicas, SentenceEmbedder,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// ModelError → the exception a Python user expects: a missing file is FileNotFoundError, a
/// file that is not what it should be is ValueError, a GPU error keeps its KilnError class.
pub(crate) fn model_err(py: Python<'_>, e: ModelError) -> PyErr {
    let msg = e.to_string();
    // One device's error of data parallel work: the class of what failed, the message naming
    // the device.
    if let ModelError::OnDevice { .. } = e {
        return match e.root() {
            ModelError::Kiln(k) => {
                to_pyerr(py, kiln_core::Error::from_code(k.code(), msg.clone()).unwrap_or_else(|| k.clone()))
            }
            ModelError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                PyFileNotFoundError::new_err(msg)
            }
            ModelError::Io { .. } => PyOSError::new_err(msg),
            ModelError::Unsupported(_) => to_pyerr(py, kiln_core::Error::Unsupported(msg)),
            _ => PyValueError::new_err(msg),
        };
    }
    match e {
        ModelError::Kiln(k) => to_pyerr(py, k),
        ModelError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(msg)
        }
        ModelError::Io { .. } => PyOSError::new_err(msg),
        ModelError::Unsupported(m) => to_pyerr(py, kiln_core::Error::Unsupported(m)),
        _ => PyValueError::new_err(msg),
    }
}

/// Runs model work with the GIL released and panics caught (as errors::gpu does for core ops).
pub(crate) fn detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> kiln_models::Result<T> + Send) -> PyResult<T> {
    py.detach(|| {
        catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(ModelError::Kiln(kiln_core::Error::from_panic(p))))
    })
    .map_err(|e| model_err(py, e))
}

/// The devices a model is loaded on: None, the default device; "all", every GPU
/// (`replicas::all_devices`); else adapter indices as ``kiln.devices()`` lists them.
pub(crate) fn model_devices(py: Python<'_>, devices: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Arc<Device>>> {
    let Some(d) = devices else {
        return detached(py, || Ok(vec![kiln_core::device()?]));
    };
    if let Ok(s) = d.extract::<String>() {
        if s == "all" {
            return detached(py, replicas::all_devices);
        }
        return Err(PyValueError::new_err(format!("devices={s:?}: \"all\", or a list of device indices")));
    }
    let bad = || PyValueError::new_err("devices: \"all\", or a list of kiln.Device or device indices (ints >= 0)");
    let items: Vec<Bound<'_, PyAny>> = d.extract().map_err(|_| bad())?;
    let ix = items
        .iter()
        .map(|x| match x.cast::<crate::classes::PyDevice>() {
            Ok(dev) => Ok(dev.get().adapter_index()),
            Err(_) if x.is_instance_of::<pyo3::types::PyBool>() => Err(bad()),
            Err(_) => x.extract::<usize>().map_err(|_| bad()),
        })
        .collect::<PyResult<Vec<usize>>>()?;
    detached(py, || replicas::devices(&ix))
}

/// A sentence embedder on one device or, with ``devices``, a copy on each (data parallel).
#[pyclass(name = "_SentenceEmbedder", module = "kiln._kiln", frozen)]
pub struct PySentenceEmbedder {
    inner: Replicas<SentenceEmbedder>,
}

#[pymethods]
impl PySentenceEmbedder {
    #[new]
    #[pyo3(signature = (model_dir, f16 = false, devices = None, shares = None))]
    fn new(
        py: Python<'_>,
        model_dir: std::path::PathBuf,
        f16: bool,
        devices: Option<&Bound<'_, PyAny>>,
        shares: Option<Vec<f64>>,
    ) -> PyResult<Self> {
        let precision = if f16 { Precision::F16 } else { Precision::F32 };
        let devices = model_devices(py, devices)?;
        let mut inner =
            detached(py, || SentenceEmbedder::load_replicated(&model_dir, &devices, LoadOptions { precision }))?;
        if let Some(s) = shares {
            inner.set_shares(&s).map_err(|e| model_err(py, e))?;
        }
        Ok(PySentenceEmbedder { inner })
    }

    /// The adapter index of each copy, in the order inputs are dealt.
    #[getter]
    fn devices(&self) -> Vec<usize> {
        self.inner.devices().iter().map(|d| d.info().index).collect()
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.first().dim()
    }

    #[getter]
    fn max_seq_length(&self) -> usize {
        self.inner.first().max_seq_length()
    }

    #[getter]
    fn normalizes(&self) -> bool {
        self.inner.first().normalizes()
    }

    #[getter]
    fn f16(&self) -> bool {
        self.inner.first().precision() == Precision::F16
    }

    fn tokenize(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<u32>>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens = detached(py, || self.inner.first().tokenize(&refs))?;
        Ok(tokens.into_iter().map(|(ids, _)| ids).collect())
    }

    /// float32 [len(texts), dim]; `normalize` None follows the model's modules.json.
    #[pyo3(signature = (texts, batch_size, normalize))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        batch_size: usize,
        normalize: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if batch_size == 0 {
            return Err(PyValueError::new_err("batch_size must be at least 1"));
        }
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let e = detached(py, || self.inner.encode_with(&refs, EncodeOptions { batch_size, normalize }))?;
        Ok(PyArray1::from_vec(py, e.data).reshape([e.rows, e.dim])?.into_any())
    }
}

/// RGB u8 images from Python: numpy arrays H x W x 3 (models.py makes them C-contiguous
/// uint8), copied out before the GIL is released: (bytes, height, width) each.
type Images = Vec<(Vec<u8>, usize, usize)>;

fn images_from(arrays: Vec<PyReadonlyArray3<'_, u8>>) -> PyResult<Images> {
    arrays
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let shape = a.shape();
            if shape[2] != 3 {
                return Err(PyValueError::new_err(format!(
                    "images[{i}] has shape {shape:?}; expected (height, width, 3) RGB"
                )));
            }
            let px = a.as_slice().map_err(|_| PyValueError::new_err(format!("images[{i}] is not C-contiguous")))?;
            Ok((px.to_vec(), shape[0], shape[1]))
        })
        .collect()
}

fn image_views(images: &Images) -> Vec<kiln_models::Image<'_>> {
    images.iter().map(|(p, h, w)| kiln_models::Image { pixels: p, height: *h, width: *w }).collect()
}

/// float32 [rows, dim] from kiln's embeddings.
fn embeddings_array(py: Python<'_>, e: kiln_models::Embeddings) -> PyResult<Bound<'_, PyAny>> {
    Ok(PyArray1::from_vec(py, e.data).reshape([e.rows, e.dim])?.into_any())
}

#[pyclass(name = "_ClipModel", module = "kiln._kiln", frozen)]
pub struct PyClipModel {
    inner: ClipModel,
}

#[pymethods]
impl PyClipModel {
    #[new]
    fn new(py: Python<'_>, model_dir: std::path::PathBuf) -> PyResult<Self> {
        Ok(PyClipModel { inner: detached(py, || ClipModel::load(&model_dir))? })
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    #[getter]
    fn image_size(&self) -> usize {
        self.inner.image_size()
    }

    fn tokenize(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<u32>>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        detached(py, || self.inner.tokenize(&refs))
    }

    fn encode_text<'py>(&self, py: Python<'py>, texts: Vec<String>, normalize: bool) -> PyResult<Bound<'py, PyAny>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embeddings_array(py, detached(py, || self.inner.encode_text(&refs, normalize))?)
    }

    fn encode_image<'py>(
        &self,
        py: Python<'py>,
        images: Vec<PyReadonlyArray3<'py, u8>>,
        normalize: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let images = images_from(images)?;
        embeddings_array(py, detached(py, || self.inner.encode_image(&image_views(&images), normalize))?)
    }

    /// float32 [N, 3, S, S]: the preprocessing alone (CLIPImageProcessor's pixel_values).
    fn pixel_values<'py>(
        &self,
        py: Python<'py>,
        images: Vec<PyReadonlyArray3<'py, u8>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.inner.image_size();
        let n = images.len();
        let images = images_from(images)?;
        let v = detached(py, || self.inner.pixel_values(&image_views(&images)))?;
        Ok(PyArray1::from_vec(py, v).reshape([n, 3, s, s])?.into_any())
    }
}

#[pyclass(name = "_ImageEmbedder", module = "kiln._kiln", frozen)]
pub struct PyImageEmbedder {
    inner: ImageEmbedder,
}

#[pymethods]
impl PyImageEmbedder {
    #[new]
    fn new(py: Python<'_>, model_dir: std::path::PathBuf) -> PyResult<Self> {
        Ok(PyImageEmbedder { inner: detached(py, || ImageEmbedder::load(&model_dir))? })
    }

    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    #[getter]
    fn image_size(&self) -> usize {
        self.inner.image_size()
    }

    fn encode_image<'py>(
        &self,
        py: Python<'py>,
        images: Vec<PyReadonlyArray3<'py, u8>>,
        normalize: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let images = images_from(images)?;
        embeddings_array(py, detached(py, || self.inner.encode(&image_views(&images), normalize))?)
    }

    fn pixel_values<'py>(
        &self,
        py: Python<'py>,
        images: Vec<PyReadonlyArray3<'py, u8>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = self.inner.image_size();
        let n = images.len();
        let images = images_from(images)?;
        let v = detached(py, || self.inner.pixel_values(&image_views(&images)))?;
        Ok(PyArray1::from_vec(py, v).reshape([n, 3, s, s])?.into_any())
    }
}
