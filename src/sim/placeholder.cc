// placeholder so the layer library has a translation unit until its sources land
