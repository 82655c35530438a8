// Ten camera photos of the corpus (MANIFEST.json): the AI upscaling test crops them, the bench's
// ai-quality scenario takes them whole.
export const CAMERA_PHOTOS = [
  'images/sharp/2569067123_aca715a2ee_o.jpg',
  'images/sharp/Landscape_1.jpg',
  'images/sharp/Portrait_1.jpg',
  'images/sharp/flowers.jpeg',
  'images/wikimedia/Cerkiew.jpg',
  'images/wikimedia/Carrie.jpg',
  'images/sharp/4.webp',
  'images/image-rs/progressive-3.jpg',
  'images/sharp/Landscape_9.jpg',
  'images/sharp/tifftag-photoshop.tiff',
];
